package broker

import (
	"testing"

	"github.com/samsa-streaming/samsa/internal/config"
)

// offset.metadata.max.bytes is a Kafka broker property (default 4096): the largest
// commit metadata the group coordinator accepts (OFFSET_METADATA_TOO_LARGE above).
func TestGroupConfigOffsetMetadataMaxBytes(t *testing.T) {
	cfg, err := config.Load("", []string{"offset.metadata.max.bytes=10"})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := groupConfig(cfg).MaxMetadataSize; got != 10 {
		t.Fatalf("MaxMetadataSize %d, want 10", got)
	}
	def, err := config.Load("", nil)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := groupConfig(def).MaxMetadataSize; got != 4096 {
		t.Fatalf("default MaxMetadataSize %d, want 4096", got)
	}
}
