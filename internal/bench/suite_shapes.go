package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Issue 11's targets for the produce shapes.
const (
	targetShapeVsNull      = 0.80 // 1 KiB records: every shape ≥ 80 % of the null broker with the same shape
	targetShapeSmallVsNull = 0.90 // 100-byte records on 6 partitions: ≥ 90 %
	targetPeakRSSMB        = 256  // broker peak RSS for 1,000 partitions at full load
	targetCPUPerMBGrowth   = 1.5  // broker CPU per MB on 64 partitions ≤ 1.5 × that on 1
)

// defaultShapes are the topics and producers users run: partitions are Kafka's unit of
// parallelism, and a benchmark of one partition hides what every partition costs.
const defaultShapes = "1,6,64,1000,6x4,100b:6"

// produceShape is one shape of the shapes scenario: a topic of partitions, producers
// clients, records of recordSize bytes.
type produceShape struct {
	Partitions int32 `json:"partitions"`
	Producers  int   `json:"producers"`
	RecordSize int   `json:"record_size"`
}

// parseShapes reads a comma-separated list of shapes: "P" (P partitions, one
// producer, 1 KiB records), "PxN" (N producers) and a "100b:" prefix for 100-byte
// records (any size: "512b:", "4kib:").
func parseShapes(list string) ([]produceShape, error) {
	var shapes []produceShape
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		sh := produceShape{Producers: 1, RecordSize: 1024}
		spec := item
		if size, rest, ok := strings.Cut(item, ":"); ok {
			n, err := parseBytes(size)
			if err != nil || n <= 0 || n > 1<<30 {
				return nil, fmt.Errorf("%w: --shapes %q: %q is not a record size", ErrBadFlag, item, size)
			}
			sh.RecordSize, spec = int(n), rest
		}
		parts, producers, hasProducers := strings.Cut(spec, "x")
		p, err := strconv.ParseInt(parts, 10, 32)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("%w: --shapes %q: %q is not a partition count", ErrBadFlag, item, parts)
		}
		sh.Partitions = int32(p)
		if hasProducers {
			if sh.Producers, err = strconv.Atoi(producers); err != nil || sh.Producers <= 0 {
				return nil, fmt.Errorf("%w: --shapes %q: %q is not a producer count", ErrBadFlag, item, producers)
			}
		}
		shapes = append(shapes, sh)
	}
	if len(shapes) == 0 {
		return nil, fmt.Errorf("%w: --shapes names no shape", ErrBadFlag)
	}
	return shapes, nil
}

func (sh produceShape) String() string {
	size := formatBytes(int64(sh.RecordSize))
	if sh.RecordSize < 1024 {
		size = fmt.Sprintf("%d B", sh.RecordSize)
	}
	s := fmt.Sprintf("%s, %d partition", size, sh.Partitions)
	if sh.Partitions != 1 {
		s += "s"
	}
	if sh.Producers != 1 {
		s += fmt.Sprintf(", %d producers", sh.Producers)
	}
	return s
}

// shapeResult is one shape's median runs against the broker and the null broker.
type shapeResult struct {
	Shape produceShape  `json:"shape"`
	Samsa ProduceResult `json:"samsa"`
	Null  ProduceResult `json:"null"`
}

// ratio is Samsa's MB/s over the null broker's.
func (r shapeResult) ratio() float64 { return ratio(r.Samsa.MBPerSec, r.Null.MBPerSec) }

func (r shapeResult) target() float64 {
	if r.Shape.RecordSize < 1024 {
		return targetShapeSmallVsNull
	}
	return targetShapeVsNull
}

// shapes runs every shape against the null broker (in a process of its own, with the
// same partitions and producers) and the broker under test, interleaved.
func (s *suiteRun) shapes() {
	for _, sh := range s.cfg.shapes {
		scenario := "shape " + sh.String()
		records := s.sizes.records1K
		if sh.RecordSize < 1024 {
			records = s.sizes.records100
		}
		var nulls, samsas []ProduceResult
		for i := range s.cfg.repeat {
			topic := s.topic(fmt.Sprintf("shape-%d-%dx%d", sh.RecordSize, sh.Partitions, sh.Producers), i)
			cfg := s.baseProduce(topic, sh.RecordSize, records)
			cfg.partitions, cfg.producers = sh.Partitions, sh.Producers
			nulls = append(nulls, s.recordProduce(scenario, "null", i, s.produceOn(againstNullProcess, cfg, "null", i)))
			cfg.brokerMetrics = s.cfg.brokerMetrics
			samsas = append(samsas, s.recordProduce(scenario, "samsa", i, s.produceOn(s.cfg.against, cfg, "samsa", i)))
			s.dropTopic(topic)
		}
		s.res.Shapes = append(s.res.Shapes, shapeResult{Shape: sh, Samsa: medianRun(samsas, produceMBs), Null: medianRun(nulls, produceMBs)})
	}
}

// shapesMarkdown renders the shapes table and the two targets on the broker's own
// usage (which need --broker-metrics).
func (r *SuiteResult) shapesMarkdown(b *strings.Builder) {
	if len(r.Shapes) == 0 {
		return
	}
	b.WriteString("| shape (acks=all, idempotent, linger 5 ms, batch ≤ 1 MiB) | Samsa MB/s | null broker MB/s (same shape) | Samsa / null | target | | broker CPU ms per MB | broker GC share | broker peak RSS MB |\n")
	b.WriteString("|---|---:|---:|---:|---|---|---:|---:|---:|\n")
	var cpu1, cpu64 float64
	for _, sh := range r.Shapes {
		usage := "– | – | –"
		if u := sh.Samsa.Broker; u != nil {
			usage = fmt.Sprintf("%.2f | %.1f %% | %.0f", u.CPUMsPerMB, 100*u.GCShare, u.PeakRSSMB)
			if sh.Shape.RecordSize == 1024 && sh.Shape.Producers == 1 {
				switch sh.Shape.Partitions {
				case 1:
					cpu1 = u.CPUMsPerMB
				case 64:
					cpu64 = u.CPUMsPerMB
				}
			}
		}
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f | ≥ %.2f | %s | %s |\n", sh.Shape, sh.Samsa.MBPerSec, sh.Null.MBPerSec,
			sh.ratio(), sh.target(), verdict(sh.ratio() >= sh.target()), usage)
	}
	b.WriteString("\n")
	for _, sh := range r.Shapes {
		if u := sh.Samsa.Broker; u != nil && sh.Shape.Partitions >= 1000 {
			fmt.Fprintf(b, "Broker peak RSS with %d partitions: %.0f MB — target < %d MB: %s. ", sh.Shape.Partitions, u.PeakRSSMB,
				targetPeakRSSMB, verdict(u.PeakRSSMB < targetPeakRSSMB))
		}
	}
	if cpu1 > 0 && cpu64 > 0 {
		fmt.Fprintf(b, "Broker CPU per MB, 64 partitions over 1: %.2f× — target ≤ %.1f×: %s.", cpu64/cpu1, targetCPUPerMBGrowth,
			verdict(cpu64/cpu1 <= targetCPUPerMBGrowth))
	}
	if cpu1 == 0 && cpu64 == 0 {
		b.WriteString("(Broker CPU, GC share and memory need --broker-metrics.)")
	}
	b.WriteString("\n\n")
}
