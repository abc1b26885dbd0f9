package ui

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// serve runs one request through h.
func serve(t *testing.T, h http.Handler, method, target string, hdr http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assetRef finds the page's references to its assets.
var assetRef = regexp.MustCompile(`(?:src|href)="\.\./\.\./\.\./assets/([^"]+)"`)

// TestEmbeddedBuild checks the committed build: the page names a script
// and a stylesheet, and both are served with their content types.
func TestEmbeddedBuild(t *testing.T) {
	h := Handler()
	resp := serve(t, h, http.MethodGet, "/ui/namespaces/team-a/virtualmachines/ws1", nil)
	page := readBody(t, resp)
	refs := assetRef.FindAllStringSubmatch(page, -1)
	if len(refs) != 2 {
		t.Fatalf("the page references %d assets, want a script and a stylesheet:\n%s", len(refs), page)
	}
	for _, ref := range refs {
		// The page at /ui/namespaces/NS/virtualmachines/NAME resolves
		// ../../../assets/ to /ui/assets/.
		resp := serve(t, h, http.MethodGet, "/ui/assets/"+ref[1], nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("asset %s: %s", ref[1], resp.Status)
		}
		if ct := resp.Header.Get("Content-Type"); ct != contentTypes[ref[1][strings.LastIndex(ref[1], "."):]] {
			t.Errorf("asset %s: Content-Type %q", ref[1], ct)
		}
	}
	if resp := serve(t, h, http.MethodGet, "/ui/assets/licenses.txt", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("licenses.txt: %s", resp.Status)
	}
}

func testFS() fstest.MapFS {
	return fstest.MapFS{
		"dist/index.html":              {Data: []byte(`<meta name="virtstation-style-nonce" content="{{NONCE}}"><script type="module" src="../../../assets/app-ABCDEFGH.js"></script>`)},
		"dist/assets/app-ABCDEFGH.js":  {Data: bytes.Repeat([]byte("console.log('virtstation');\n"), 100)},
		"dist/assets/app-ABCDEFGH.css": {Data: []byte("body{}")},
		"dist/assets/licenses.txt":     {Data: []byte("MIT")},
	}
}

func TestHandler(t *testing.T) {
	h, err := newHandler(testFS())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		target      string
		hdr         http.Header
		status      int
		contentType string
		cache       string
		encoding    string
		body        string
	}{
		"the page of a VM": {target: "/ui/namespaces/team-a/virtualmachines/ws1", status: http.StatusOK,
			contentType: "text/html; charset=utf-8", cache: "no-store", body: `<script type="module"`},
		"a hashed script, cached for good": {target: "/ui/assets/app-ABCDEFGH.js", status: http.StatusOK,
			contentType: "text/javascript; charset=utf-8", cache: cacheImmutable, body: "console.log"},
		"a stylesheet": {target: "/ui/assets/app-ABCDEFGH.css", status: http.StatusOK,
			contentType: "text/css; charset=utf-8", cache: cacheImmutable, body: "body{}"},
		"an unhashed asset is revalidated": {target: "/ui/assets/licenses.txt", status: http.StatusOK,
			contentType: "text/plain; charset=utf-8", cache: cacheRevalidate, body: "MIT"},
		"gzip when the browser takes it": {target: "/ui/assets/app-ABCDEFGH.js", hdr: http.Header{"Accept-Encoding": {"gzip, deflate, br"}},
			status: http.StatusOK, contentType: "text/javascript; charset=utf-8", cache: cacheImmutable, encoding: "gzip", body: "console.log"},
		"no gzip at q=0": {target: "/ui/assets/app-ABCDEFGH.js", hdr: http.Header{"Accept-Encoding": {"gzip;q=0"}},
			status: http.StatusOK, contentType: "text/javascript; charset=utf-8", cache: cacheImmutable, body: "console.log"},
		"an unknown asset":      {target: "/ui/assets/app-ZZZZZZZZ.js", status: http.StatusNotFound},
		"the page is no asset":  {target: "/ui/assets/index.html", status: http.StatusNotFound},
		"a nested asset path":   {target: "/ui/assets/x/app-ABCDEFGH.js", status: http.StatusNotFound},
		"an incomplete VM path": {target: "/ui/namespaces/team-a", status: http.StatusNotFound},
		"the ui root":           {target: "/ui/", status: http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := serve(t, h, http.MethodGet, tc.target, tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %s, want %d", resp.Status, tc.status)
			}
			// Every answer, 404s included, carries the security headers.
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy = %q", csp)
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
			if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("X-Frame-Options = %q", got)
			}
			if tc.status != http.StatusOK {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tc.contentType)
			}
			if got := resp.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control = %q, want %q", got, tc.cache)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
				t.Errorf("Content-Encoding = %q, want %q", got, tc.encoding)
			}
			body := resp.Body
			if tc.encoding == "gzip" {
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				body = zr
			}
			b, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.body) {
				t.Errorf("body %.80q does not contain %q", b, tc.body)
			}
		})
	}
}

// TestPageNonce: each page gets its own style nonce, in the policy and in
// the page, and the policy allows no inline script.
func TestPageNonce(t *testing.T) {
	h, err := newHandler(testFS())
	if err != nil {
		t.Fatal(err)
	}
	nonceIn := regexp.MustCompile(`content="([A-Za-z0-9+/=]{24})"`)
	seen := map[string]bool{}
	for range 3 {
		resp := serve(t, h, http.MethodGet, "/ui/namespaces/team-a/virtualmachines/ws1", nil)
		m := nonceIn.FindStringSubmatch(readBody(t, resp))
		if m == nil {
			t.Fatal("no nonce in the page")
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "style-src-elem 'self' 'nonce-"+m[1]+"'") {
			t.Errorf("the policy %q lacks the page's nonce %s", csp, m[1])
		}
		if !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
			t.Errorf("script policy is not strict: %q", csp)
		}
		if seen[m[1]] {
			t.Errorf("nonce %s served twice", m[1])
		}
		seen[m[1]] = true
	}
}

func TestConditionalAsset(t *testing.T) {
	h, err := newHandler(testFS())
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(t, h, http.MethodGet, "/ui/assets/app-ABCDEFGH.css", nil)
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	cases := map[string]struct {
		method string
		hdr    http.Header
		status int
		body   string
	}{
		"revalidation":                {http.MethodGet, http.Header{"If-None-Match": {etag}}, http.StatusNotModified, ""},
		"weak revalidation":           {http.MethodGet, http.Header{"If-None-Match": {`"other", W/` + etag}}, http.StatusNotModified, ""},
		"any":                         {http.MethodGet, http.Header{"If-None-Match": {"*"}}, http.StatusNotModified, ""},
		"changed":                     {http.MethodGet, http.Header{"If-None-Match": {`"other"`}}, http.StatusOK, readBody(t, resp)},
		"head: the length, no body":   {http.MethodHead, nil, http.StatusOK, ""},
		"a range of the encoded body": {http.MethodGet, http.Header{"Range": {"bytes=0-1"}}, http.StatusPartialContent, readBody(t, serve(t, h, http.MethodGet, "/ui/assets/app-ABCDEFGH.css", nil))[:2]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := serve(t, h, tc.method, "/ui/assets/app-ABCDEFGH.css", tc.hdr)
			if resp.StatusCode != tc.status {
				t.Fatalf("%s, want %d", resp.Status, tc.status)
			}
			if got := readBody(t, resp); got != tc.body {
				t.Errorf("body %q, want %q", got, tc.body)
			}
			if tc.method == http.MethodHead && resp.Header.Get("Content-Length") == "" {
				t.Error("HEAD without Content-Length")
			}
		})
	}
}

func TestIncompleteBuildIsAnError(t *testing.T) {
	cases := map[string]fstest.MapFS{
		"no index":       {"dist/assets/app.js": {Data: []byte("x")}},
		"no placeholder": {"dist/index.html": {Data: []byte("<html>")}, "dist/assets/app.js": {Data: []byte("x")}},
		"unknown type":   {"dist/index.html": {Data: []byte("{{NONCE}}")}, "dist/assets/app.wasm": {Data: []byte("x")}},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := newHandler(files); err == nil {
				t.Fatal("newHandler succeeded")
			}
		})
	}
}
