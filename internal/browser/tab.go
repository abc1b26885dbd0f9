package browser

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowDriverOp is logged: where a run on a loaded machine spends its time.
const slowDriverOp = 2 * time.Second

// Tab is one page in its own browser context, as one person's tab. Its
// methods fail its test on any error, after a screenshot.
type Tab struct {
	b    *Browser
	t    *testing.T
	name string
}

// NewTab opens an empty page named name in a fresh context whose every
// request, WebSocket handshakes included, carries headers (as a proxy in
// front of the server would add them); nil adds none. It closes when the
// test ends.
func (b *Browser) NewTab(t *testing.T, name string, headers map[string]string) *Tab {
	t.Helper()
	p := &Tab{b: b, t: t, name: name}
	p.Do("newPage", map[string]any{"headers": headers})
	t.Cleanup(func() { _, _ = b.Call("closePage", map[string]any{"page": name}) })
	return p
}

// Open opens url, a page the bridge serves, in a new tab named name. It
// fails the test unless the page answers 200 with the bridge's
// Content-Security-Policy.
func (b *Browser) Open(t *testing.T, name, url string) *Tab {
	t.Helper()
	p := b.NewTab(t, name, nil)
	var resp struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
	}
	p.Decode(p.Do("goto", map[string]any{"url": url}), &resp)
	if resp.Status != http.StatusOK {
		t.Fatalf("%s: GET the page: %d", name, resp.Status)
	}
	if csp := resp.Headers["content-security-policy"]; !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("%s: the page came without its Content-Security-Policy: %q", name, csp)
	}
	return p
}

// Name is the tab's name, as the driver knows it.
func (p *Tab) Name() string { return p.name }

// Do sends op for this page and returns its value; an error takes a
// screenshot and fails the test.
func (p *Tab) Do(op string, args map[string]any) json.RawMessage {
	p.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	args["page"] = p.name
	start := time.Now()
	v, err := p.b.Call(op, args)
	if took := time.Since(start); took > slowDriverOp {
		p.t.Logf("%s: %s took %v", p.name, op, took.Round(time.Millisecond))
	}
	if err != nil {
		p.Screenshot("failed-" + op)
		p.t.Fatalf("%s: %s: %v", p.name, op, err)
	}
	return v
}

// Decode unmarshals a driver value into into, or fails the test.
func (p *Tab) Decode(v json.RawMessage, into any) {
	p.t.Helper()
	if err := json.Unmarshal(v, into); err != nil {
		p.t.Fatalf("%s: driver value %s: %v", p.name, v, err)
	}
}

// PageStatus is the page's #status element.
type PageStatus struct {
	State string `json:"state"`
	Code  string `json:"code"`
	Text  string `json:"text"`
}

// WaitState waits until #status has data-state state and returns it.
func (p *Tab) WaitState(state string) PageStatus {
	p.t.Helper()
	var st PageStatus
	p.Decode(p.Do("waitState", map[string]any{"state": state}), &st)
	return st
}

// WaitText waits until selector's text contains text.
func (p *Tab) WaitText(selector, text string) {
	p.t.Helper()
	p.Do("waitText", map[string]any{"selector": selector, "text": text})
}

// Click clicks selector.
func (p *Tab) Click(selector string) {
	p.t.Helper()
	p.Do("click", map[string]any{"selector": selector})
}

// Fill sets the input selector's value.
func (p *Tab) Fill(selector, value string) {
	p.t.Helper()
	p.Do("fill", map[string]any{"selector": selector, "value": value})
}

// TypeInto clicks selector, then types text key by key (Enter for \n).
func (p *Tab) TypeInto(selector, text string) {
	p.t.Helper()
	p.Do("type", map[string]any{"selector": selector, "text": text})
}

// Eval evaluates the JavaScript expression expr in the page and decodes
// its value into into.
func (p *Tab) Eval(expr string, into any) {
	p.t.Helper()
	p.Decode(p.Do("eval", map[string]any{"expr": expr}), into)
}

// WaitFor waits until the JavaScript expression expr, evaluated in the
// page, is truthy.
func (p *Tab) WaitFor(expr string) { p.t.Helper(); p.Do("waitFor", map[string]any{"expr": expr}) }

// Screenshot saves the page as an artifact named after the test and what,
// and returns its path; failures to do so only log, and return "".
func (p *Tab) Screenshot(what string) string {
	path := filepath.Join(p.b.artifacts, strings.NewReplacer("/", "-", " ", "-").Replace(p.t.Name())+"-"+what+".png")
	if _, err := p.b.Call("screenshot", map[string]any{"page": p.name, "path": path}); err != nil {
		p.t.Logf("%s: screenshot: %v", p.name, err)
		return ""
	}
	p.t.Logf("screenshot: %s", path)
	return path
}

// pngDataURL starts what canvas.toDataURL('image/png') returns.
const pngDataURL = "data:image/png;base64,"

// CanvasPNG returns the pixels of the canvas at selector, as PNG, from
// the canvas itself (not a screenshot of the page). It fails the test when
// selector is not a canvas.
func (p *Tab) CanvasPNG(selector string) []byte {
	p.t.Helper()
	sel, err := json.Marshal(selector)
	if err != nil {
		p.t.Fatal(err)
	}
	var data *string
	p.Eval(`(() => {
		const c = document.querySelector(`+string(sel)+`);
		return c instanceof HTMLCanvasElement ? c.toDataURL('image/png') : null;
	})()`, &data)
	if data == nil {
		p.Screenshot("no-canvas")
		p.t.Fatalf("%s: no canvas at %s", p.name, selector)
	}
	if !strings.HasPrefix(*data, pngDataURL) {
		p.t.Fatalf("%s: canvas %s gave %.40q, want a PNG data URL", p.name, selector, *data)
	}
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(*data, pngDataURL))
	if err != nil {
		p.t.Fatalf("%s: canvas %s: decode its PNG: %v", p.name, selector, err)
	}
	return png
}

// PageReport is what the page did, as the driver saw it.
type PageReport struct {
	Sockets []string `json:"sockets"` // WebSocket URLs opened
	CSP     []string `json:"csp"`     // Content-Security-Policy violations
	Errors  []string `json:"errors"`  // uncaught page errors
	Console []string `json:"console"` // other console errors and warnings
	Failed  []string `json:"failed"`  // responses of status 400 and above
}

// Report returns what the page has done so far.
func (p *Tab) Report() PageReport {
	p.t.Helper()
	var r PageReport
	p.Decode(p.Do("report", nil), &r)
	return r
}

// CheckClean fails on Content-Security-Policy violations and uncaught
// errors: the bundle must run under the bridge's policy as it is. Other
// console messages and failed requests are logged.
func (p *Tab) CheckClean() {
	p.t.Helper()
	r := p.Report()
	if len(r.CSP) > 0 || len(r.Errors) > 0 {
		p.t.Errorf("%s: CSP violations %q, page errors %q", p.name, r.CSP, r.Errors)
	}
	for _, m := range r.Console {
		p.t.Logf("%s console: %s", p.name, m)
	}
	for _, f := range r.Failed {
		p.t.Logf("%s HTTP: %s", p.name, f)
	}
}
