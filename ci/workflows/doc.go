// Package workflows holds the GitHub Actions workflows of tessera-qa (pr.yml, nightly.yml,
// chaos-cluster.yml; docs/dashboard.md says how to install them) and reads them: Load parses
// them strictly and Commands finds every tessera-qa and Ginkgo command in their scripts. Its
// tests check the workflows' structure and that those commands are the documented ones; the
// CLI's tests check that they parse against the real verbs and flags.
package workflows
