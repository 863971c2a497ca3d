//go:build !unix

package bench

import "errors"

// flushDirtyPages does nothing where sync(2) does not exist.
func flushDirtyPages() {}

// dropPageCache is not supported here.
func dropPageCache() error {
	return errors.New("dropping the page cache is not supported on this platform")
}
