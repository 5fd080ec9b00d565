package fakekubelet

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// junk is not HTTP/2: a gRPC client reading it as frames fails the handshake.
const junk = "HTTP/1.1 500 not a kubelet\r\n\r\n\x00\xff\xfe garbage garbage garbage\n"

// StartGarbage listens on socketPath and answers every connection with junk
// bytes, like some other program squatting on the kubelet's socket. stop
// closes the listener and every connection and waits for them.
func StartGarbage(socketPath string) (stop func(), err error) {
	if err := removeStaleSocket(socketPath); err != nil {
		return nil, err
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("fakekubelet: %w", err)
	}
	var (
		mu    sync.Mutex
		conns = make(map[net.Conn]struct{})
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := lis.Accept()
			if err != nil {
				return // listener closed
			}
			mu.Lock()
			conns[conn] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.WriteString(conn, junk)
				// Keep the connection open so the client reads the junk
				// rather than an early EOF; drain until it hangs up.
				_, _ = io.Copy(io.Discard, conn)
				_ = conn.Close()
				mu.Lock()
				delete(conns, conn)
				mu.Unlock()
			}()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = lis.Close()
			mu.Lock()
			for c := range conns {
				_ = c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}, nil
}
