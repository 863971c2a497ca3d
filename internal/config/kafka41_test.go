package config

import "testing"

// TestKafka41PropertiesTakeEffect: the properties Samsa implements reach the fields
// the broker reads.
func TestKafka41PropertiesTakeEffect(t *testing.T) {
	b, err := Load("", []string{
		"controlled.shutdown.enable=false",
		"controller.quota.window.num=3", "controller.quota.window.size.seconds=2",
		"group.share.min.record.lock.duration.ms=5000", "group.share.max.record.lock.duration.ms=120000",
		"group.share.record.lock.duration.ms=100000",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.ControlledShutdownEnable {
		t.Error("controlled.shutdown.enable=false left ControlledShutdownEnable true")
	}
	if b.Security.ControllerQuotaWindowNum != 3 || b.Security.ControllerQuotaWindowSizeSeconds != 2 {
		t.Errorf("controller quota window = %d × %d s, want 3 × 2 s", b.Security.ControllerQuotaWindowNum, b.Security.ControllerQuotaWindowSizeSeconds)
	}
	if err := ValidateGroupConfigs(b, map[string]string{"share.record.lock.duration.ms": "110000"}, []string{"share.record.lock.duration.ms"}); err != nil {
		t.Errorf("share.record.lock.duration.ms within the raised bound: %v", err)
	}
	if got := GroupMillis(b, map[string]string{"share.record.lock.duration.ms": "1000"}, "share.record.lock.duration.ms"); got != 5000 {
		t.Errorf("a stored lock duration below the bound counts as %d, want 5000", got)
	}
	if d := Default(); !d.ControlledShutdownEnable || d.Security.ControllerQuotaWindowNum != 11 || d.Security.ControllerQuotaWindowSizeSeconds != 1 {
		t.Errorf("defaults: controlled shutdown %v, controller quota window %d × %d s; want true, 11 × 1 s",
			d.ControlledShutdownEnable, d.Security.ControllerQuotaWindowNum, d.Security.ControllerQuotaWindowSizeSeconds)
	}
}
