package virthandler

import (
	"encoding/json"
	"net/http"
	"runtime"
)

// KubeVirtVersion is the KubeVirt release this server stands in for, as
// its /version reports it.
const KubeVirtVersion = "v1.9.0"

// VersionInfo is KubeVirt's version.Info (kubevirt.io/client-go/version),
// the body of GET /apis/subresources.kubevirt.io/v1/version. client-go's
// kubecli is not importable from this module (see test/kubecli), so the
// type is repeated here, field for field.
type VersionInfo struct {
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// serveVersion answers what virt-api's /version does, for KubeVirtVersion.
func serveVersion(w http.ResponseWriter, _ *http.Request) {
	body, err := json.Marshal(VersionInfo{
		GitVersion:   KubeVirtVersion,
		GitTreeState: "clean",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	})
	if err != nil {
		http.Error(w, "encode version", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
