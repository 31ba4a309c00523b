// Package tmpfs gives tests a small filesystem of their own to fill: a
// tmpfs of a chosen size mounted on a fresh directory (Linux, as root). The
// disk-full tests of the log and the store use it.
package tmpfs
