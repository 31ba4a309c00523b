package api

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/http"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/hourglassdb/hourglass/command/promstore"
)

// Streamed remote read (STREAMED_XOR_CHUNKS), as Prometheus serves it and
// Thanos and Prometheus' own client read it: the reply is a stream of
// frames, each the uvarint length of a ChunkedReadResponse, the CRC-32C of
// it (big-endian) and the message: one series a frame, its samples as XOR
// chunks of at most promChunkSamples, a series longer than a frame holds
// split over several. The frames are written as they are made: the reply
// is never held whole.

// promResponseType picks, as Prometheus does, the first of the client's
// accepted response types that is served; none given means SAMPLES.
func promResponseType(accepted []prompb.ReadRequest_ResponseType) (prompb.ReadRequest_ResponseType, error) {
	if len(accepted) == 0 {
		return prompb.ReadRequest_SAMPLES, nil
	}
	for _, t := range accepted {
		switch t {
		case prompb.ReadRequest_SAMPLES, prompb.ReadRequest_STREAMED_XOR_CHUNKS:
			return t, nil
		}
	}
	return 0, badRequest("none of the accepted response types %v is served: SAMPLES and STREAMED_XOR_CHUNKS are", accepted)
}

const (
	// promFrameBytes bounds a frame's chunks, as Prometheus'
	// --storage.remote.read-max-bytes-in-frame does by default (1 MiB).
	promFrameBytes = 1 << 20
	// promChunkSamples is the most samples a chunk holds, as the TSDB's.
	promChunkSamples = 120
	// promStreamType is the streamed reply's content type.
	promStreamType = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"
)

var promCRC = crc32.MakeTable(crc32.Castagnoli)

// writePromStream writes the series of each query (series[i] answers
// query i) as a stream of frames.
func writePromStream(w http.ResponseWriter, series [][]promstore.Series) error {
	w.Header().Set("Content-Type", promStreamType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	var buf []byte
	frame := func(resp *prompb.ChunkedReadResponse) error {
		n := resp.Size()
		buf = buf[:0]
		buf = binary.AppendUvarint(buf, uint64(n))
		at := len(buf)
		buf = append(buf, make([]byte, 4+n)...)
		if _, err := resp.MarshalToSizedBuffer(buf[at+4:]); err != nil {
			return fmt.Errorf("marshal a remote read frame: %w", err)
		}
		binary.BigEndian.PutUint32(buf[at:], crc32.Checksum(buf[at+4:], promCRC))
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if f != nil {
			f.Flush()
		}
		return nil
	}
	for qi, all := range series {
		for i := range all {
			s := &all[i]
			if len(s.Samples) == 0 {
				continue
			}
			lbls := make([]prompb.Label, 0, s.Labels.Len())
			s.Labels.Range(func(l labels.Label) { lbls = append(lbls, prompb.Label{Name: l.Name, Value: l.Value}) })
			left := promFrameBytes
			for _, l := range lbls {
				left -= l.Size()
			}
			room := left
			var chks []prompb.Chunk
			for at := 0; at < len(s.Samples); {
				end := min(at+promChunkSamples, len(s.Samples))
				c := chunkenc.NewXORChunk()
				app, err := c.Appender()
				if err != nil {
					return err
				}
				for _, smp := range s.Samples[at:end] {
					app.Append(0, smp.T(), smp.F()) // no start time
				}
				chks = append(chks, prompb.Chunk{MinTimeMs: s.Samples[at].T(), MaxTimeMs: s.Samples[end-1].T(),
					Type: prompb.Chunk_XOR, Data: c.Bytes()})
				room -= chks[len(chks)-1].Size()
				at = end
				if room > 0 && at < len(s.Samples) {
					continue
				}
				resp := prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{{Labels: lbls, Chunks: chks}}, QueryIndex: int64(qi)}
				if err := frame(&resp); err != nil {
					return err
				}
				chks, room = chks[:0], left
			}
		}
	}
	return nil
}
