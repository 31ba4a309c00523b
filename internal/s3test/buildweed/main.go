// Command buildweed builds the SeaweedFS binary the S3 tests run into the
// cache (s3test.Build) unless it is there, and prints its path: make deps
// runs it so that no test waits for the build.
package main

import (
	"fmt"
	"os"

	"github.com/hourglassdb/hourglass/internal/s3test"
)

func main() {
	bin, err := s3test.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
