// Package browser drives a real Chromium for end-to-end tests of the
// built-in client: Debian's chromium (/usr/bin/chromium), driven by
// playwright-core from test/bridge/browser/driver.mjs, which Start runs
// with node. Each test opens pages as a person would, each in its own
// browser context (its own storage, like another user), and clicks, types,
// waits for and looks at them.
//
// It needs Debian's chromium and nodejs packages and `npm ci` in
// test/bridge/browser (hack/install-test-deps.sh does both); Start fails
// the test with the missing step otherwise. Screenshots go to
// $VIRTSTATION_ARTIFACTS, or test/bridge/browser/artifacts.
//
// It is test code: only tests import it.
package browser
