//go:build pccl_no_pkgconfig

package pccl

// Without pkg-config (go build -tags pccl_no_pkgconfig): the header of this
// checkout and -lpccl, whose directory the build passes in
// CGO_LDFLAGS="-L<dir> -Wl,-rpath,<dir>" (a build tree's bindings/libpccl).

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -lpccl
*/
import "C"
