package api

// VideoTypes are the values virtstation.io/video accepts: the video models
// KubeVirt passes to QEMU on amd64.
var VideoTypes = []string{"bochs", "cirrus", "ramfb", "vga", "virtio"}
