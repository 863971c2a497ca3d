package peer

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handshake readies a new connection within ctx (or DialTimeout, whichever ends
// first): the TLS handshake, the SASL exchange, and ApiVersions when the Conn
// negotiates versions (Options.Downgrade), whose answer it returns.
func (c *Conn) handshake(ctx context.Context, nc net.Conn) (net.Conn, map[int16]int16, error) {
	if c.opts.Security.TLS == nil && c.opts.Security.SASL == nil && len(c.opts.Downgrade) == 0 {
		return nc, nil, nil
	}
	deadline := time.Now().Add(c.opts.DialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := nc.SetDeadline(deadline); err != nil {
		nc.Close()
		return nil, nil, err
	}
	if c.opts.Security.TLS != nil {
		cfg := c.opts.Security.TLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(c.addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	if c.opts.Security.SASL != nil {
		if err := c.authenticate(ctx, nc); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("SASL %s: %w", c.opts.Security.SASL.Name(), err)
		}
	}
	var versions map[int16]int16
	if len(c.opts.Downgrade) > 0 {
		var err error
		if versions, err = c.apiVersions(nc); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("ApiVersions: %w", err)
		}
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, versions, nil
}

// apiVersions asks the peer the versions it serves (ApiVersions v3, as Kafka's
// clients ask at every new connection).
func (c *Conn) apiVersions(nc net.Conn) (map[int16]int16, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa", "1"
	resp, err := c.roundTrip(nc, req, -1)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(r.ErrorCode)
	}
	versions := make(map[int16]int16, len(r.ApiKeys))
	for _, k := range r.ApiKeys {
		versions[k.ApiKey] = k.MaxVersion
	}
	return versions, nil
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 until the mechanism is
// done.
func (c *Conn) authenticate(ctx context.Context, nc net.Conn) error {
	mech := c.opts.Security.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	resp, err := c.roundTrip(nc, hs, 0)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return kerr.ErrorForCode(code)
	}
	session, token, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return err
	}
	for corr := int32(1); ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = token
		resp, err := c.roundTrip(nc, req, corr)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			msg := ""
			if ar.ErrorMessage != nil {
				msg = *ar.ErrorMessage
			}
			return fmt.Errorf("%w: %s", kerr.ErrorForCode(ar.ErrorCode), msg)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if corr > 10 {
			return errors.New("the exchange does not end")
		}
		token = next
	}
}

// roundTrip writes one request and reads its response, before the connection's
// reader runs.
func (c *Conn) roundTrip(nc net.Conn, req kmsg.Request, corr int32) (kmsg.Response, error) {
	if _, err := nc.Write(c.fmt.AppendRequest(nil, req, corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(nc, frame); err != nil {
		return nil, err
	}
	return decodeResponse(&pending{req: req, corr: corr}, frame)
}
