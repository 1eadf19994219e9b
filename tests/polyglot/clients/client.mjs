// Unmanaged client: node client.mjs SOCKET NAME HEX_BODY [sync|async]
// Prints the hex response_info, a newline and the response body; on an error
// status prints its name, a newline and the message, and exits 3.
import { API, CumuloError } from '../../../sdk/javascript/index.js';

const [socket, name, bodyHex, mode = 'sync'] = process.argv.slice(2);
const body = Buffer.from(bodyHex, 'hex');
const api = await API.connect({ socket, prefix: '/client/javascript/' });
let output;
let exitCode = 0;
try {
  let r;
  if (mode === 'async') {
    const transId = await api.sendAsync(name, body);
    r = await api.recvAsync({ transId });
    if (r === null) throw new Error('no response');
  } else {
    r = await api.sendSync(name, body);
  }
  output = Buffer.concat([Buffer.from(Buffer.from(r.info).toString('hex') + '\n'), Buffer.from(r.response)]);
} catch (e) {
  if (!(e instanceof CumuloError)) throw e;
  output = Buffer.from(`${e.statusName}\n${e.message}`);
  exitCode = 3;
}
await api.close();
process.stdout.write(output, () => process.exit(exitCode));
