// Compiled by tsc --noEmit (test/types.test.js): the declarations accept what the
// SDK accepts and refuse what it refuses (each @ts-expect-error must be an error).

import {
  API, CumuloError, Status, infoEncode, infoParse, run, type Request, type Response,
} from 'cumulo';

async function service(): Promise<void> {
  const api: API = await API.connect({ socket: '/tmp/cumulo.sock', prefix: '/tools/', window: 4 });
  await api.subscribe('echo', async (req: Request, instance: API) => {
    const pairs: Array<[string, string]> = infoParse(req.requestInfo);
    const source: bigint = req.source;
    if (req.sync && source > 0n && pairs.length > 0) await instance.forward(req, '/other', { timeout: 100 });
    return { info: { 'content-type': 'text/plain', status: 200 }, response: req.request };
  });
  await api.subscribe('plain', () => 'text');
  await api.subscribe('nothing', () => undefined);
  const count: number = await api.subscribeCount('echo');
  try {
    const answer: Response = await api.sendSync('/tools/echo', 'hi', { info: [['k', 'v']], timeout: count, priority: -1 });
    const body: Buffer = answer.response;
    body.toString();
  } catch (err) {
    if (err instanceof CumuloError && err.status === Status.TIMEOUT) console.log(err.statusName, err.transId);
    const unavailable: 13 = Status.UNAVAILABLE;
    if (err instanceof CumuloError && err.status === unavailable) console.log('try later');
  }
  const id = await api.sendAsync('/tools/echo', new Uint8Array([1, 2]), { waitForService: true });
  const got: Response | null = await api.recvAsync({ transId: id, timeout: 100 });
  const copies: Buffer[] = await api.mcastAsync('/tools/*', '');
  await api.recvAsync({ transId: copies[0]?.toString('hex') });
  const timedOut: boolean = await api.poll({ timeout: 10 });
  const prefix: string = api.prefix;
  const encoded: Buffer = infoEncode(new Map([['a', 'b']]));
  console.log(got, timedOut, prefix, encoded, api.timeoutSync, api.priorityDefault);
  await api.close();

  // @ts-expect-error a handler must be a function
  await api.subscribe('bad', 'not a handler');
  // @ts-expect-error handlers return payloads, not numbers
  await api.subscribe('bad', () => 42);
  // @ts-expect-error the priority is a number
  await api.sendSync('/x', '', { priority: 'high' });
  const overTls: API = await API.connect({
    socket: 'tcp://core.example:7391', prefix: '/tools/',
    tlsCa: '/etc/cumulo/ca.pem', tlsCert: '/etc/cumulo/client.pem', tlsKey: '/etc/cumulo/client.key',
  });
  await overTls.close();
  // @ts-expect-error TLS options are file paths
  await API.connect({ socket: 'tcp://core.example:7391', prefix: '/tools/', tlsCa: Buffer.alloc(0) });
  // @ts-expect-error instances come from API.connect
  new API();
  // @ts-expect-error accessors are read-only
  api.prefix = '/elsewhere/';
}

await run(async (api) => {
  await api.subscribe('x', (req) => req.request);
}, { window: 2 });
void service;
