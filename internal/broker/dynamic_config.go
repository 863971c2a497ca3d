package broker

import (
	"maps"
	"strconv"
	"sync"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// dynamicConfig caches the broker's effective configuration: its static one overlaid
// by the dynamic broker configs of the metadata image (config.Broker.WithDynamic).
type dynamicConfig struct {
	mu struct {
		sync.Mutex
		def, own map[string]string // the image's configs for "" and for this node
		eff      *config.Broker
	}
	watch struct {
		sync.Mutex
		fns      []func(*config.Broker)
		notified *config.Broker
	}
}

// WatchConfig calls fn with the broker's effective configuration now and whenever
// the dynamic broker configs change it (what applies them outside the broker: the
// server's connection limits). fn runs on the goroutine applying metadata and must
// not block.
func (b *Broker) WatchConfig(fn func(*config.Broker)) {
	w := &b.dynamic.watch
	w.Lock()
	defer w.Unlock()
	w.fns = append(w.fns, fn)
	eff := b.effectiveConfig(b.image())
	if w.notified == nil {
		w.notified = eff
	}
	fn(eff)
}

// notify tells the watchers of eff if it is not what they were last told.
func (d *dynamicConfig) notify(eff *config.Broker) {
	w := &d.watch
	w.Lock()
	defer w.Unlock()
	if w.notified == eff {
		return
	}
	w.notified = eff
	for _, fn := range w.fns {
		fn(eff)
	}
}

// effectiveConfig is the broker's configuration with the dynamic broker configs of img
// (cluster default, then this node's) over its static properties, rebuilt only when
// those configs change. It is what topic defaults, partition settings and
// DescribeConfigs read; b.cfg stays the static configuration.
func (b *Broker) effectiveConfig(img *metadata.Image) *config.Broker {
	def, own := img.BrokerConfigs(""), img.BrokerConfigs(strconv.Itoa(int(b.nodeID)))
	d := &b.dynamic.mu
	d.Lock()
	defer d.Unlock()
	if d.eff != nil && maps.Equal(d.def, def) && maps.Equal(d.own, own) {
		return d.eff
	}
	eff, err := b.cfg.WithDynamic(def, own)
	if err != nil {
		b.logger.Warn("some dynamic broker configs are not applied", "err", err)
	}
	d.def, d.own, d.eff = def, own, eff
	return eff
}
