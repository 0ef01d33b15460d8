// Command gitserver is the Git server of wheelhouse's end-to-end tests of Git chart
// sources. It serves the bare repositories under one root, read-only, three ways:
//
//   - plain HTTP, anonymous: Git's smart HTTP protocol by Debian's `git http-backend`
//     run through net/http/cgi;
//   - HTTPS, the same repositories behind HTTP basic auth (one user and password) or
//     `Authorization: Bearer <token>` (one token); 401 with a Basic challenge otherwise,
//     and 403 for an authenticated request for anything under /forbidden/;
//   - SSH, public-key auth against an authorized_keys file; only `git-upload-pack PATH`
//     (or `git upload-pack PATH`) is run, as `git upload-pack ROOT/PATH`.
//
// Usage:
//
//	gitserver serve -root DIR -http ADDR -https ADDR -cert FILE -key FILE \
//	    -credentials FILE -ssh ADDR -host-key FILE -authorized-keys FILE
//	gitserver keygen DIR
//
// -credentials names a file of KEY=VALUE lines holding GIT_USER, GIT_PASSWORD and
// GIT_TOKEN (kept off the command line). keygen writes, into DIR, an ed25519 host key
// (host_ed25519, host_ed25519.pub), an ed25519 client key pair in the OpenSSH private key
// format without a passphrase (client_ed25519, client_ed25519.pub), authorized_keys
// holding the client's public key, and the public key of an unrelated host
// (other_host_ed25519.pub) for a known_hosts that must be refused. It never overwrites.
//
// Logs a line per request to stderr; stops cleanly on SIGTERM or SIGINT.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("gitserver: ")
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		if err := serve(os.Args[2:]); err != nil {
			log.Fatal(err)
		}
	case "keygen":
		if len(os.Args) != 3 {
			usage()
		}
		if err := keygen(os.Args[2]); err != nil {
			log.Fatal(err)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: gitserver serve -root DIR -http ADDR -https ADDR -cert FILE -key FILE -credentials FILE -ssh ADDR -host-key FILE -authorized-keys FILE
       gitserver keygen DIR`)
	os.Exit(2)
}

// gitConfig is passed to every git the server runs (GIT_CONFIG_COUNT, git 2.31+): nothing
// can be pushed, and a commit reachable from a ref may be fetched by its id, as on the
// usual Git hosts.
var gitConfig = [][2]string{
	{"http.receivepack", "false"},
	{"uploadpack.allowReachableSHA1InWant", "true"},
}

func gitEnv() []string {
	env := []string{fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(gitConfig))}
	for i, kv := range gitConfig {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	root := fs.String("root", "", "directory holding the bare repositories")
	httpAddr := fs.String("http", "", "address of the anonymous plain HTTP listener")
	httpsAddr := fs.String("https", "", "address of the authenticated HTTPS listener")
	certFile := fs.String("cert", "", "HTTPS certificate (PEM)")
	keyFile := fs.String("key", "", "HTTPS private key (PEM)")
	credsFile := fs.String("credentials", "", "file with GIT_USER=, GIT_PASSWORD= and GIT_TOKEN= lines")
	sshAddr := fs.String("ssh", "", "address of the SSH listener")
	hostKeyFile := fs.String("host-key", "", "SSH host private key")
	authKeysFile := fs.String("authorized-keys", "", "authorized_keys file of the SSH listener")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for name, v := range map[string]string{
		"root": *root, "http": *httpAddr, "https": *httpsAddr, "cert": *certFile, "key": *keyFile,
		"credentials": *credsFile, "ssh": *sshAddr, "host-key": *hostKeyFile, "authorized-keys": *authKeysFile,
	} {
		if v == "" {
			return fmt.Errorf("-%s is required", name)
		}
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	if st, err := os.Stat(absRoot); err != nil || !st.IsDir() {
		return fmt.Errorf("repositories root %s is not a directory", absRoot)
	}
	creds, err := readCredentials(*credsFile)
	if err != nil {
		return err
	}
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("git --exec-path: %v (is git installed?)", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return fmt.Errorf("git http-backend: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("HTTPS certificate: %v", err)
	}
	sshConfig, err := sshServerConfig(*hostKeyFile, *authKeysFile)
	if err != nil {
		return err
	}

	// Bind everything before serving anything, so that one listener answering means all do.
	httpLn, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	httpsLn, err := net.Listen("tcp", *httpsAddr)
	if err != nil {
		return err
	}
	sshLn, err := net.Listen("tcp", *sshAddr)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	gitHandler := &cgi.Handler{
		Path: backend,
		Root: "/",
		Env:  append([]string{"GIT_PROJECT_ROOT=" + absRoot, "GIT_HTTP_EXPORT_ALL=1"}, gitEnv()...),
		// http-backend's complaints come without a newline; one log line each.
		Stderr: logWriter("git http-backend: "),
	}
	git := readOnly(unchunked(gitHandler))
	plain := &http.Server{Handler: logged("http", git), ReadHeaderTimeout: 10 * time.Second}
	secure := &http.Server{
		Handler:           logged("https", authenticated(creds, git)),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	sshSrv := &sshServer{root: absRoot, config: sshConfig, ctx: ctx}

	errs := make(chan error, 3)
	go func() { errs <- plain.Serve(httpLn) }()
	go func() { errs <- secure.ServeTLS(httpsLn, "", "") }()
	go func() { errs <- sshSrv.serve(sshLn) }()
	log.Printf("serving %s: http://%s (anonymous), https://%s (basic or bearer), ssh://%s (public key)",
		absRoot, httpLn.Addr(), httpsLn.Addr(), sshLn.Addr())

	var runErr error
	select {
	case <-ctx.Done():
		log.Printf("stopping")
	case runErr = <-errs:
	}
	sshLn.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	plain.Shutdown(shutdownCtx)
	secure.Shutdown(shutdownCtx)
	stop() // ends running SSH commands
	sshSrv.wait(shutdownCtx)
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) && !errors.Is(runErr, net.ErrClosed) {
		return runErr
	}
	log.Printf("stopped")
	return nil
}

type credentials struct{ user, password, token string }

func readCredentials(file string) (credentials, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return credentials{}, err
	}
	var c credentials
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "GIT_USER":
			c.user = v
		case "GIT_PASSWORD":
			c.password = v
		case "GIT_TOKEN":
			c.token = v
		}
	}
	if c.user == "" || c.password == "" || c.token == "" {
		return c, fmt.Errorf("%s must set GIT_USER, GIT_PASSWORD and GIT_TOKEN", file)
	}
	return c, nil
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authenticated lets through requests with the user's basic credentials or the bearer
// token; others get 401 with a Basic challenge. Authenticated requests for anything under
// /forbidden/ get 403.
func authenticated(c credentials, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := false
		if user, password, basic := r.BasicAuth(); basic {
			ok = equal(user, c.user) && equal(password, c.password)
		} else if token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); bearer {
			ok = equal(strings.TrimSpace(token), c.token)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="wheelhouse-local-git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/forbidden/") {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readOnly refuses pushes outright (git http-backend would refuse them too, by config).
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack" {
			http.Error(w, "this server is read-only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxBody bounds a request body read into memory by unchunked.
const maxBody = 64 << 20

// unchunked reads a chunked request body into memory and passes it on with its length:
// net/http/cgi answers 400 to chunked bodies (CGI wants CONTENT_LENGTH), and git sends
// its requests chunked once they outgrow http.postBuffer (1 MiB by default).
func unchunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			if len(body) > maxBody {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
		}
		next.ServeHTTP(w, r)
	})
}

type logWriter string

func (prefix logWriter) Write(b []byte) (int, error) {
	log.Printf("%s%s", prefix, strings.TrimSpace(string(b)))
	return len(b), nil
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func logged(listener string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		log.Printf("%s %s %s %d %s", listener, r.Method, r.URL.RequestURI(), sw.status, time.Since(start).Round(time.Millisecond))
	})
}

// --- SSH ----------------------------------------------------------------------------------

func sshServerConfig(hostKeyFile, authKeysFile string) (*ssh.ServerConfig, error) {
	pemBytes, err := os.ReadFile(hostKeyFile)
	if err != nil {
		return nil, err
	}
	hostKey, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %v", hostKeyFile, err)
	}
	if _, err := authorizedKeys(authKeysFile); err != nil {
		return nil, err
	}
	config := &ssh.ServerConfig{
		// Read at every attempt, so a test may change the file while the server runs.
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			keys, err := authorizedKeys(authKeysFile)
			if err != nil {
				log.Printf("ssh: %v", err)
				return nil, err
			}
			for _, k := range keys {
				if bytes.Equal(k.Marshal(), key.Marshal()) {
					return &ssh.Permissions{Extensions: map[string]string{"key": ssh.FingerprintSHA256(key)}}, nil
				}
			}
			return nil, fmt.Errorf("key %s not authorized", ssh.FingerprintSHA256(key))
		},
		ServerVersion: "SSH-2.0-wheelhouse-gitserver",
	}
	config.AddHostKey(hostKey)
	return config, nil
}

func authorizedKeys(file string) ([]ssh.PublicKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var keys []ssh.PublicKey
	for len(bytes.TrimSpace(data)) > 0 {
		key, _, _, rest, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		keys = append(keys, key)
		data = rest
	}
	return keys, nil
}

type sshServer struct {
	root   string
	config *ssh.ServerConfig
	ctx    context.Context // done on SIGTERM: running commands are killed
	conns  sync.WaitGroup
}

func (s *sshServer) serve(ln net.Listener) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			s.handle(conn)
		}()
	}
}

func (s *sshServer) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *sshServer) handle(nc net.Conn) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // for the handshake only
	conn, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		log.Printf("ssh %s: handshake: %v", nc.RemoteAddr(), err)
		return
	}
	nc.SetDeadline(time.Time{})
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	// A shutdown closes the connection, which ends the loop below.
	go func() {
		select {
		case <-s.ctx.Done():
			time.Sleep(2 * time.Second) // let a command that was killed report its status
			conn.Close()
		case <-waitConn(conn):
		}
	}()
	var sessions sync.WaitGroup
	for newCh := range chans {
		if newCh.ChannelType() != "session" {
			newCh.Reject(ssh.UnknownChannelType, "only session channels are served")
			continue
		}
		ch, chReqs, err := newCh.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.session(conn, ch, chReqs)
		}()
	}
	sessions.Wait()
}

func waitConn(conn *ssh.ServerConn) <-chan struct{} {
	done := make(chan struct{})
	go func() { conn.Wait(); close(done) }()
	return done
}

func (s *sshServer) session(conn *ssh.ServerConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	who := fmt.Sprintf("ssh %s@%s", conn.User(), conn.RemoteAddr())
	var env []string
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" {
				env = append(env, "GIT_PROTOCOL="+kv.Value)
				req.Reply(true, nil)
			} else {
				req.Reply(false, nil)
			}
		case "exec":
			var cmd struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &cmd); err != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			status := s.exec(ch, cmd.Command, env)
			log.Printf("%s exec %q %s: exit %d", who, cmd.Command, strings.Join(env, " "), status)
			ch.CloseWrite()
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
			return
		case "shell":
			fmt.Fprintln(ch.Stderr(), "This is a read-only Git server: no shell; only git-upload-pack runs here.")
			req.Reply(false, nil)
			log.Printf("%s: shell refused", who)
		default:
			req.Reply(false, nil)
		}
	}
}

// exec runs `git upload-pack` for the repository the command names and returns its exit
// status; it refuses anything else (with status 128, as git does for an unusable repo).
func (s *sshServer) exec(ch ssh.Channel, command string, env []string) uint32 {
	fail := func(format string, a ...any) uint32 {
		fmt.Fprintf(ch.Stderr(), "fatal: "+format+"\n", a...)
		return 128
	}
	var arg string
	switch {
	case strings.HasPrefix(command, "git-upload-pack "):
		arg = strings.TrimPrefix(command, "git-upload-pack ")
	case strings.HasPrefix(command, "git upload-pack "):
		arg = strings.TrimPrefix(command, "git upload-pack ")
	case strings.HasPrefix(command, "git-receive-pack"), strings.HasPrefix(command, "git receive-pack"):
		return fail("this server is read-only: pushing is not allowed")
	default:
		return fail("only git-upload-pack is served here, not %q", command)
	}
	repo, err := unquote(strings.TrimSpace(arg))
	if err != nil {
		return fail("%v", err)
	}
	dir, err := s.resolve(repo)
	if err != nil {
		return fail("%v", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fail("'%s' does not appear to be a git repository", repo)
	}

	c := exec.CommandContext(s.ctx, "git", "upload-pack", "--strict", dir)
	c.Env = append(append(os.Environ(), gitEnv()...), env...)
	c.Stdout = ch
	c.Stderr = ch.Stderr()
	c.WaitDelay = 5 * time.Second
	stdin, err := c.StdinPipe()
	if err != nil {
		return fail("%v", err)
	}
	if err := c.Start(); err != nil {
		return fail("git upload-pack: %v", err)
	}
	// Not waited for: a client that keeps its side open must not hold the session.
	go func() {
		io.Copy(stdin, ch)
		stdin.Close()
	}()
	err = c.Wait()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		return uint32(exitErr.ExitCode())
	default:
		return 255
	}
}

// resolve maps a path a client asked for (`demo.git`, `/demo.git`, `~/demo.git`) to a
// directory under the root, refusing any that would leave it.
func (s *sshServer) resolve(repo string) (string, error) {
	p := strings.TrimPrefix(repo, "~/")
	p = strings.TrimLeft(p, "/")
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("'%s' does not appear to be a git repository", repo)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("'%s': paths may not leave the repositories root", repo)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(path.Clean(p))), nil
}

// unquote undoes the quoting of git's ssh transport: the path in single quotes, a quote
// inside it written as quote, backslash, quote, quote. Also accepts a double-quoted or an
// unquoted path.
func unquote(s string) (string, error) {
	if s == "" {
		return "", errors.New("no repository given")
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1], nil
	}
	if s[0] != '\'' {
		if strings.ContainsAny(s, "'\" \t") {
			return "", fmt.Errorf("cannot parse repository path %q", s)
		}
		return s, nil
	}
	var out strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated quote in %q", s)
			}
			out.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case s[i] == '\\' && i+1 < len(s):
			out.WriteByte(s[i+1])
			i += 2
		default:
			return "", fmt.Errorf("cannot parse repository path %q", s)
		}
	}
	return out.String(), nil
}

// --- keygen -------------------------------------------------------------------------------

func keygen(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	host, err := newKey("wheelhouse-local-git-host")
	if err != nil {
		return err
	}
	client, err := newKey("wheelhouse-local-git-client")
	if err != nil {
		return err
	}
	other, err := newKey("unrelated-host")
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"host_ed25519", host.private, 0o600},
		{"host_ed25519.pub", host.public, 0o644},
		{"client_ed25519", client.private, 0o600},
		{"client_ed25519.pub", client.public, 0o644},
		{"authorized_keys", client.public, 0o600},
		{"other_host_ed25519.pub", other.public, 0o644},
	}
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f.name)); err == nil {
			return fmt.Errorf("%s exists; keygen never overwrites", filepath.Join(dir, f.name))
		}
	}
	for _, f := range files {
		file, err := os.OpenFile(filepath.Join(dir, f.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return err
		}
		w := bufio.NewWriter(file)
		w.Write(f.data)
		if err := w.Flush(); err != nil {
			file.Close()
			return err
		}
		if err := file.Close(); err != nil {
			return err
		}
	}
	return nil
}

type keyPair struct{ private, public []byte }

// newKey makes an ed25519 key: the private half in the OpenSSH format (no passphrase), the
// public half as an authorized_keys line.
func newKey(comment string) (keyPair, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return keyPair{}, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return keyPair{}, err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment + "\n"
	return keyPair{private: pem.EncodeToMemory(block), public: []byte(line)}, nil
}
