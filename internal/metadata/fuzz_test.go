package metadata

import (
	"errors"
	"testing"
)

// FuzzDecodeBatch: arbitrary bytes either decode to records that Apply accepts or
// rejects cleanly, never a panic.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch([]Record{TopicRecord{Name: "t", ID: TopicID{1}}, PartitionRecord{Topic: TopicID{1}, Replicas: []int32{1}}}))
	f.Add(EncodeBatch([]Record{PartitionChangeRecord{Topic: TopicID{1}, Partition: -1}}))
	f.Add([]byte(`[{"v":1,"type":"config","record":{"resource_type":2}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error %v does not wrap ErrCorruptRecord", err)
			}
			return
		}
		img, err := Apply(EmptyImage(), 0, recs)
		if err != nil {
			return
		}
		if _, err := Apply(EmptyImage(), 0, img.Records()); err != nil {
			t.Fatalf("image records do not re-apply: %v", err)
		}
	})
}
