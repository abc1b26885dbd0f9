package api

import "k8s.io/apimachinery/pkg/util/sets"

// VideoTypes are the values virtstation.io/video accepts: the video models
// KubeVirt passes to QEMU on some architecture (on amd64, which takes them
// all), sorted. Arch.VideoTypes says which of them each architecture takes.
var VideoTypes = sets.List(onSomeArch(func(a Arch) []string { return a.VideoTypes }))
