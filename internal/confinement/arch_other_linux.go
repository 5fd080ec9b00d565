//go:build linux && !amd64 && !arm64

package confinement

// Other architectures are not supported: Apply refuses to run rather than install a filter
// nobody has tested there.
var native = abi{}
