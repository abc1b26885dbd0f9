package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// Routes the Handler serves.
const (
	// PagePattern is the page of one VM.
	PagePattern = "GET /ui/namespaces/{namespace}/virtualmachines/{name}"
	// AssetPattern is the page's scripts, styles and licences.
	AssetPattern = "GET /ui/assets/{file}"
)

// noncePlaceholder in dist/index.html becomes each response's style nonce.
const noncePlaceholder = "{{NONCE}}"

// Cache lifetimes. Hashed assets never change under their name; the page
// names the current ones, so the browser revalidates it every time.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// hashedName matches esbuild's content-hashed output names, app-H7RVOB5H.js.
var hashedName = regexp.MustCompile(`-[A-Z0-9]{8}\.[a-z]+$`)

// contentTypes are set explicitly: the host's mime.types must not decide
// whether a browser runs a script.
var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".html": "text/html; charset=utf-8",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body, gzipped []byte
	contentType   string
	etag          string
	cacheControl  string
}

// handler serves the page and its assets. It is safe for concurrent use:
// everything is read-only after Handler returns.
type handler struct {
	mux *http.ServeMux
	// pageHead and pageTail are index.html around the nonce placeholder.
	pageHead, pageTail []byte
	assets             map[string]*asset
}

// Handler serves the browser client: the page at PagePattern and its assets
// at AssetPattern. Mount it on "/ui/". It panics when the embedded build is
// incomplete, which TestEmbeddedBuild catches before a release.
func Handler() http.Handler {
	h, err := newHandler(dist)
	if err != nil {
		panic(err)
	}
	return h
}

func newHandler(files fs.FS) (*handler, error) {
	page, err := fs.ReadFile(files, "dist/index.html")
	if err != nil {
		return nil, fmt.Errorf("ui: the browser client is not built (run make ui): %w", err)
	}
	head, tail, ok := bytes.Cut(page, []byte(noncePlaceholder))
	if !ok {
		return nil, fmt.Errorf("ui: dist/index.html has no %s placeholder", noncePlaceholder)
	}
	h := &handler{mux: http.NewServeMux(), pageHead: head, pageTail: tail, assets: map[string]*asset{}}
	entries, err := fs.ReadDir(files, "dist/assets")
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		a, err := loadAsset(files, e.Name())
		if err != nil {
			return nil, err
		}
		h.assets[e.Name()] = a
	}
	h.mux.HandleFunc(PagePattern, h.servePage)
	h.mux.HandleFunc(AssetPattern, h.serveAsset)
	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header(), "")
		http.NotFound(w, r)
	})
	return h, nil
}

func loadAsset(files fs.FS, name string) (*asset, error) {
	body, err := fs.ReadFile(files, "dist/assets/"+name)
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	ct, ok := contentTypes[path.Ext(name)]
	if !ok {
		return nil, fmt.Errorf("ui: no content type for asset %s", name)
	}
	sum := sha256.Sum256(body)
	a := &asset{body: body, contentType: ct, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`, cacheControl: cacheRevalidate}
	if hashedName.MatchString(name) {
		a.cacheControl = cacheImmutable
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if gz.Len() < len(body) {
		a.gzipped = gz.Bytes()
	}
	return a, nil
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// servePage answers the page with a fresh style nonce. The VM in the path is
// not looked up here: the page's own sessions do that, with the user's token.
func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	nonce := newNonce()
	hdr := w.Header()
	setSecurityHeaders(hdr, nonce)
	hdr.Set("Content-Type", contentTypes[".html"])
	hdr.Set("Cache-Control", "no-store")
	var body bytes.Buffer
	body.Grow(len(h.pageHead) + len(nonce) + len(h.pageTail))
	body.Write(h.pageHead)
	body.WriteString(nonce)
	body.Write(h.pageTail)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body.Bytes()))
}

func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[r.PathValue("file")]
	hdr := w.Header()
	setSecurityHeaders(hdr, "")
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", a.cacheControl)
	hdr.Set("ETag", a.etag)
	hdr.Set("Vary", "Accept-Encoding")
	body := a.body
	if a.gzipped != nil && acceptsGzip(r) {
		hdr.Set("Content-Encoding", "gzip")
		body = a.gzipped
	}
	// ServeContent answers HEAD, If-None-Match against the ETag (304),
	// ranges and Content-Length.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// ContentSecurityPolicy is the page's policy with the given style nonce.
// 'self' in connect-src covers the bridge's ws: and wss: URLs (CSP Level 3).
func ContentSecurityPolicy(nonce string) string {
	styleElem := "'self'"
	if nonce != "" {
		styleElem += " 'nonce-" + nonce + "'"
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"style-src-elem " + styleElem,
		"style-src-attr 'unsafe-inline'",
		"img-src 'self' data: blob:",
		"font-src 'self'",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// setSecurityHeaders marks every response: no sniffing, no framing, no
// referrer (the page's URL names the VM).
func setSecurityHeaders(h http.Header, nonce string) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy(nonce))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// nonceBytes is 128 bits, as CSP recommends.
const nonceBytes = 16

func newNonce() string {
	b := make([]byte, nonceBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(b)
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// with a nonzero quality.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, found := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if !found {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}
