package testutil

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// MemClient is an in-memory storage.Client (the collector has no
// storagetest package at v0.165.0; contrib's is in its own module), for
// the components that checkpoint through a storage extension. Its errors
// are set per test.
type MemClient struct {
	mu             sync.Mutex
	data           map[string][]byte
	GetErr, SetErr error
	Sets           int
	Closed         bool
}

// NewMemClient returns an empty client.
func NewMemClient() *MemClient { return &MemClient{data: map[string][]byte{}} }

// Get implements storage.Client.
func (c *MemClient) Get(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.GetErr != nil {
		return nil, c.GetErr
	}
	return bytes.Clone(c.data[key]), nil
}

// Set implements storage.Client.
func (c *MemClient) Set(_ context.Context, key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.SetErr != nil {
		return c.SetErr
	}
	c.Sets++
	c.data[key] = bytes.Clone(value)
	return nil
}

// Delete implements storage.Client.
func (c *MemClient) Delete(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.data, key)
	return nil
}

// Batch implements storage.Client.
func (c *MemClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		var err error
		switch op.Type {
		case storage.Get:
			op.Value, err = c.Get(ctx, op.Key)
		case storage.Set:
			err = c.Set(ctx, op.Key, op.Value)
		case storage.Delete:
			err = c.Delete(ctx, op.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Close implements storage.Client.
func (c *MemClient) Close(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Closed = true
	return nil
}

// Bytes returns a copy of what key holds.
func (c *MemClient) Bytes(key string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.data[key])
}

// Put sets key to b, bypassing SetErr.
func (c *MemClient) Put(key string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data[key] = b
}

// MemExtension is a storage extension handing out one client to components
// of Kind.
type MemExtension struct {
	Client *MemClient
	Kind   component.Kind
	Err    error
	Owner  component.ID
}

// Start implements component.Component.
func (*MemExtension) Start(context.Context, component.Host) error { return nil }

// Shutdown implements component.Component.
func (*MemExtension) Shutdown(context.Context) error { return nil }

// GetClient implements storage.Extension.
func (e *MemExtension) GetClient(_ context.Context, kind component.Kind, id component.ID, _ string) (storage.Client, error) {
	if kind != e.Kind {
		return nil, fmt.Errorf("kind %v, want %v", kind, e.Kind)
	}
	e.Owner = id
	if e.Err != nil {
		return nil, e.Err
	}
	return e.Client, nil
}

// ExtHost is a component.Host holding the given extensions.
type ExtHost map[component.ID]component.Component

// GetExtensions implements component.Host.
func (h ExtHost) GetExtensions() map[component.ID]component.Component { return h }
