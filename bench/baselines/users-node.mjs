// A baseline of bench/users: the users API as its users run it today, a bare
// Node `http` server answering GET /v1/users with the same 36-byte JSON as
// examples/users, one process.
//   node bench/baselines/users-node.mjs PORT
import http from 'node:http';

const USERS = '{"users":[{"id":1,"name":"alicia"}]}';
const port = Number(process.argv[2]);

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/v1/users') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': USERS.length });
    res.end(USERS);
  } else {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  }
});
server.listen({ port, host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => process.exit(0));
