package wal_test

import (
	"fmt"
	"log"
	"os"

	"github.com/hourglassdb/hourglass/timeseries/wal"
)

func Example() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(wal.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	l.Append([]byte("cpu,host=a usage_idle=90 1700000000000000000\n"))
	seg, _ := l.Cut() // a checkpoint covers everything before seg
	l.Append([]byte("cpu,host=a usage_idle=91 1700000010000000000\n"))
	l.Truncate(seg)
	l.Close()

	l, err = wal.Open(wal.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Replay(seg, func(pos wal.Pos, rec []byte) error {
		fmt.Printf("segment %d offset %d: %s", pos.Segment, pos.Offset, rec)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// segment 2 offset 8: cpu,host=a usage_idle=91 1700000010000000000
}
