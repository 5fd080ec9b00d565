//go:build linux && cgo

package landlock

/*
#include "landlock_status.h"
*/
import "C"

import (
	"strings"
	"syscall"
)

// Status says what the constructor did, before the Go runtime started.
func Status() Result {
	step := C.GoString(C.otelcol_gpu_landlock_step)
	r := Result{ABI: int(C.otelcol_gpu_landlock_abi), Step: step}
	switch step {
	case "applied":
		r.Applied = true
		if paths := C.GoString(&C.otelcol_gpu_landlock_paths[0]); paths != "" {
			r.WritableDirs = strings.Split(paths, ":")
		}
	case "off":
		r.Off = true
	default:
		r.Err = syscall.Errno(C.otelcol_gpu_landlock_errno)
	}
	return r
}
