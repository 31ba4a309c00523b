package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"
)

// FuzzManifest feeds decodeManifest manifests whose JSON the fuzzer
// writes, signed with their true checksum so that the decoder's checks
// after it are reached: never a panic, and a manifest it accepts lists
// only files Restore may write, whose sizes add up, and encodes and
// decodes again to itself. Unsigned bytes are tried too.
func FuzzManifest(f *testing.F) {
	const id = "20261127T120000.000Z-abcd"
	m := &Manifest{Format: manifestFormat, ID: id, Taken: time.Unix(1, 0).UTC(), Finished: time.Unix(2, 0).UTC(), Bytes: 7,
		Files: []File{{Path: "store/000001.sst", Size: 7, SHA256: "00"}}}
	m.Files[0].Key = fileKey(m.Files[0].Path, 7, "00")
	seed, err := encodeManifest(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[:len(seed)-len("\nsha256 ")-2*sha256.Size-1])
	f.Add([]byte(`{"format":1,"id":"` + id + `","bytes":0,"files":[]}`))
	f.Add([]byte(`{"id":"` + id + `","files":[{"path":"../x","size":1,"key":"files/x"}],"bytes":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := decodeManifest(id, body); err == nil {
			t.Fatal("an unsigned manifest was accepted")
		}
		sum := sha256.Sum256(body)
		signed := append(append(append([]byte{}, body...), "\nsha256 "...), hex.EncodeToString(sum[:])+"\n"...)
		got, err := decodeManifest(id, signed)
		if err != nil {
			return
		}
		var total int64
		for _, fl := range got.Files {
			if !validPath(fl.Path) || fl.Key != fileKey(fl.Path, fl.Size, fl.SHA256) {
				t.Fatalf("accepted a file Restore may not write: %+v", fl)
			}
			total += fl.Size
		}
		if total != got.Bytes || got.ID != id || len(got.Files) == 0 {
			t.Fatalf("accepted %+v", got)
		}
		again, err := encodeManifest(got)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeManifest(id, again); err != nil {
			t.Fatalf("a manifest it accepted does not decode again: %v", err)
		}
	})
}
