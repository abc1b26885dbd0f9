// Package nginx runs Debian's nginx (package nginx, /usr/sbin/nginx) for
// tests, as an ordinary process: no root, no port 80, no file outside its
// own temporary directory.
//
// Start writes a private directory holding a main nginx.conf (the
// process's own settings: no daemon, one worker, the pid file, the error log
// on stderr, every temporary path inside the directory), the caller's
// http-context configuration as http.conf, and the caller's other files
// (included configuration, certificates, pages) by relative path. nginx reads
// relative paths in its configuration from that directory, as it reads them
// from /etc/nginx in production, so a shipped file that names
// "virtstation/ca.crt" or includes "location.d/*.conf" runs unchanged. It then
// runs `nginx -p DIR/ -c DIR/nginx.conf -e stderr` and returns once the
// listen address accepts connections.
//
// When the test runs as root, nginx runs as the user nobody, which owns the
// directory: the master and its worker hold no privilege, as they would not
// in KubeVirt Manager's container either.
//
// The listen address is the caller's (it writes the listen directive); Reserve
// picks a free loopback port for it, which another process could take before
// nginx binds it: Start then fails with nginx's "Address already in use".
package nginx
