// Package browsertest drives a headless Chromium from tests, to check a
// page through its DOM as a browser renders it (the agent's status page).
//
//	bin := browsertest.Require(t) // skips without Chromium, fails under CI=true
//	b := browsertest.Start(t, browsertest.Options{Path: bin})
//	pg := b.NewPage(ctx)
//	pg.Navigate(ctx, "http://127.0.0.1:8080/ui/")
//	pg.WaitTrue(ctx, "document.querySelectorAll('.cell').length === 4", 10*time.Second)
//	png := pg.Screenshot(ctx)
//
// # Protocol
//
// Chromium runs with --remote-debugging-pipe: the DevTools protocol
// travels over the child's descriptors 3 (commands in) and 4 (answers and
// events out) as JSON messages each ended by a NUL byte, so no websocket
// and no debugging port are needed. Commands carry an id and, for a page,
// the session id of a flat attachment (Target.attachToTarget with
// flatten); answers are matched by id. The events kept are the page's
// uncaught exceptions and console errors (Page.Errors), which a test
// asserts are none.
//
// # Processes and network
//
// The browser runs under internal/proctest (its own process group, killed
// with every renderer at the test's end or at its deadline), with a
// throw-away profile and HOME, and flags that turn off every background
// service that would reach the internet; its host resolver answers
// nothing but localhost and 127.0.0.1 (the addresses the project's tests
// serve on), so a page cannot reach out either.
package browsertest
