package coordkey

import "testing"

func TestPartitionMatchesJavaHashCode(t *testing.T) {
	// javaHash is String.hashCode computed independently, in 64-bit and truncated.
	javaHash := func(units ...int64) int32 {
		var h int64
		for _, u := range units {
			h = (31*h + u) & 0xffffffff
		}
		return int32(uint32(h))
	}
	abs := func(h int32) int32 {
		if h == -1<<31 {
			return 0
		}
		if h < 0 {
			return -h
		}
		return h
	}
	tests := []struct {
		key  string
		n    int32
		want int32
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},
		{"ab", 50, 3105 % 50},
		// "polygenelubricants".hashCode() is Integer.MIN_VALUE: Utils.abs maps it to 0.
		{"polygenelubricants", 50, 0},
		{"my-consumer-group-with-a-long-name", 50, abs(javaHash(func() []int64 {
			var u []int64
			for _, r := range "my-consumer-group-with-a-long-name" {
				u = append(u, int64(r))
			}
			return u
		}()...)) % 50},
		// A character outside the BMP hashes as its two UTF-16 surrogates.
		{"g😀", 7, abs(javaHash('g', 0xD83D, 0xDE00)) % 7},
	}
	for _, tt := range tests {
		if got := Partition(tt.key, tt.n); got != tt.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", tt.key, tt.n, got, tt.want)
		}
	}
	if javaHash(func() []int64 {
		var u []int64
		for _, r := range "polygenelubricants" {
			u = append(u, int64(r))
		}
		return u
	}()...) != -1<<31 {
		t.Fatal("test premise: polygenelubricants should hash to MIN_VALUE")
	}
}
