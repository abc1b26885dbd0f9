package api

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxGPUsPerDevice bounds one entry; no host has more GPUs of one kind.
const maxGPUsPerDevice = 16

// GPURequest is one entry of virtstation.io/gpus.
type GPURequest struct {
	// DeviceName is the device plugin's resource name, e.g. nvidia.com/GH100_H200.
	DeviceName string
	// Count is how many of them, 1 to 16.
	Count int
}

// ParseGPUs parses virtstation.io/gpus: "deviceName=count[,deviceName=count]".
// A device name is a qualified resource name (vendor.com/model); each may
// appear once.
func ParseGPUs(value string, fld *field.Path) ([]GPURequest, field.ErrorList) {
	v := strings.TrimSpace(value)
	if v == "" {
		return nil, nil
	}
	var out []GPURequest
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, entry := range strings.Split(v, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(entry), "=")
		name, count = strings.TrimSpace(name), strings.TrimSpace(count)
		if !ok {
			count = "1"
		}
		f := fld.Index(i)
		if msgs := validation.IsQualifiedName(name); len(msgs) > 0 || !strings.Contains(name, "/") {
			errs = append(errs, field.Invalid(f, entry, "want deviceName=count with a device plugin resource name such as nvidia.com/GH100_H200=1"))
			continue
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > maxGPUsPerDevice {
			errs = append(errs, field.Invalid(f, entry, fmt.Sprintf("count must be a whole number from 1 to %d", maxGPUsPerDevice)))
			continue
		}
		if seen.Has(name) {
			errs = append(errs, field.Duplicate(f, name))
			continue
		}
		seen.Insert(name)
		out = append(out, GPURequest{DeviceName: name, Count: n})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}
