// Package dashboard renders the results store as web pages: the overview, one page per
// benchmark series, the reproducibility matrix, flaky specs and the chaos/stress metrics.
//
//   - Site (site.go) renders a page by name from the store's read-side views
//     (report/views.go); pages.go builds each page's data.
//   - Charts (chart.go, scale.go) are inline SVG drawn on the server: no JavaScript, no
//     fonts or libraries from elsewhere, so a page reads the same from the server, from an
//     exported folder on file:// and in a screenshot.
//   - Handler (handler.go) serves the pages read-only: GET and HEAD only, a strict
//     Content-Security-Policy, static assets from the binary.
//   - Export (export.go) writes every page into a folder that opens without a network.
//
// Every string that came from a test name, a log or a JSON file goes through html/template,
// which escapes it for the context it lands in (text, attribute, URL). docs/dashboard.md is
// the user documentation.
package dashboard
