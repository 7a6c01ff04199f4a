// Package headless loads pages in headless Chromium for the tests that look at the dashboard
// the way a reader does (report/dashboard's browser test, the CLI's first-run spec):
// the DOM the browser built and a screenshot. Debian's chromium, installed by
// ci/setup.d/40-chromium.sh; Missing says why a test must skip.
package headless

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Chromium is the browser the tests drive.
const Chromium = "/usr/bin/chromium"

// Missing is nil when Chromium is installed, else the reason to skip, naming the setup script.
func Missing() error {
	if _, err := os.Stat(Chromium); err != nil {
		return fmt.Errorf("headless browser test needs %s (ci/setup.d/40-chromium.sh installs Debian's chromium): %v", Chromium, err)
	}
	return nil
}

// Browse loads url in headless Chromium and returns the DOM after load; the same launch writes
// a 1280x900 screenshot to shot. Each call is a fresh browser with a throwaway profile (3-4 s
// on the 2-core machines, most of it starting up).
func Browse(url, shot string) (string, error) {
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+profile,
		"--window-size=1280,900", "--screenshot="+shot, "--dump-dom", url)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chromium: %v: %s", err, LastLines(stderr.String(), 5))
	}
	if !strings.Contains(out.String(), "</html>") {
		return "", fmt.Errorf("chromium printed no DOM: %s", LastLines(stderr.String(), 5))
	}
	return out.String(), nil
}

// Ink reads a screenshot and says how much of it below the first y0 rows is drawn: the number
// of distinct colors (to 5 bits a channel) and the share of pixels that are neither white nor
// the dashboard's page background (#f6f7f9). A blank or unstyled page has few of both.
func Ink(file string, y0 int) (colors int, inked float64, err error) {
	fh, err := os.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		return 0, 0, fmt.Errorf("screenshot %s is not a PNG: %v", file, err)
	}
	b := img.Bounds()
	seen := map[[3]uint8]bool{}
	total, n := 0, 0
	for y := b.Min.Y + y0; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			seen[[3]uint8{c[0] &^ 7, c[1] &^ 7, c[2] &^ 7}] = true
			total++
			if c != [3]uint8{0xf6, 0xf7, 0xf9} && c != [3]uint8{0xff, 0xff, 0xff} {
				n++
			}
		}
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("screenshot %s has no pixels below row %d", file, y0)
	}
	return len(seen), float64(n) / float64(total), nil
}

// LastLines joins the last n lines of s with " | " (a browser's stderr in one error line).
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
