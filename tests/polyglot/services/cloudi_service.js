// A test service written against CloudI's own JavaScript API (npm `cloudi`),
// run by the core with protocol = "cloudi": each pattern exercises one CloudI
// call against the core (test_cloudi_js.py says what each must answer). One
// thread per process; the process index tells the processes apart.
//
// The request of send_sync, send_async and forward is `name\ntimeout_ms\nbody`.

'use strict';

const CloudI = require('cloudi').CloudI;

const NULL_TRANS_ID = Buffer.alloc(16);

function callArgs(request) {
    const text = request.toString('binary');
    const first = text.indexOf('\n');
    const second = text.indexOf('\n', first + 1);
    return [text.slice(0, first), parseInt(text.slice(first + 1, second), 10), text.slice(second + 1)];
}

function isNull(transId) {
    return Buffer.from(transId, 'binary').equals(NULL_TRANS_ID);
}

// CloudI's API takes a handler of exactly 9 declared parameters; `fn` gets
// them as one array.
function handler(fn) {
    return function (type, name, pattern, info, request, timeout, priority, transId, source) {
        return fn.call(this, [type, name, pattern, info, request, timeout, priority, transId, source]);
    };
}

function Task(api) {
    this.api = api;
    this.me = String(api.process_index());
}

// Answers the request being handled (from a callback, later, as CloudI's own tests do).
Task.prototype.answer = function (req, response) {
    this.api.return_(req[0], req[1], req[2], '', response, req[5], req[7], req[8]);
};

Task.prototype.member = handler(function (req) {
    this.answer(req, 'member-' + req[4].toString('binary'));
});

Task.prototype.whoami = handler(function (req) {
    this.answer(req, this.me);
});

Task.prototype.star = handler(function (req) {
    this.answer(req, 'star-' + this.me);
});

Task.prototype.delay = handler(function (req) {
    const ms = parseInt(req[4].toString('binary'), 10);
    setTimeout(() => this.answer(req, 'delay-' + ms), ms);
});

Task.prototype.send_sync = handler(function (req) {
    const [name, timeout, body] = callArgs(req[4]);
    this.api.send_sync(name, body, (info, response, transId) => {
        this.answer(req, isNull(transId) ? 'timeout' : response.toString('binary'));
    }, timeout);
});

Task.prototype.send_async = handler(function (req) {
    const [name, timeout, body] = callArgs(req[4]);
    this.api.send_async(name, body, (transId) => {
        this.api.recv_async((info, response, got) => {
            this.answer(req, isNull(got) ? 'timeout' : response.toString('binary'));
        }, timeout + 1000, transId);
    }, timeout);
});

Task.prototype.forward = handler(function (req) {
    const [name, , body] = callArgs(req[4]);
    this.api.forward_(req[0], name, req[3], body, req[5], req[6], req[7], req[8]);
});

// `count` send_sync to whoami, which every process subscribes:
// `me:answers from others:answers from me:timeouts`.
Task.prototype.self_send = handler(function (req) {
    const total = parseInt(req[4].toString('binary'), 10);
    let others = 0, mine = 0, timeouts = 0;
    const next = (left) => {
        if (left == 0) {
            this.answer(req, [this.me, others, mine, timeouts].join(':'));
            return;
        }
        this.api.send_sync(this.api.prefix() + 'whoami', '', (info, response, transId) => {
            if (isNull(transId)) timeouts++;
            else if (response.toString('binary') == this.me) mine++;
            else others++;
            next(left - 1);
        }, 2000);
    };
    next(total);
});

// mcast_async to the name in the request, every answer collected:
// `me:copies:sorted answers`.
Task.prototype.mcast_to = handler(function (req) {
    this.api.mcast_async(this.api.prefix() + req[4].toString('binary'), '', (transIds) => {
        const ids = transIds.map((t) => Buffer.from(t, 'binary').toString('hex'));
        const answers = [];
        const next = () => {
            if (answers.length == ids.length) {
                this.answer(req, [this.me, ids.length, answers.sort().join(',')].join(':'));
                return;
            }
            this.api.recv_async((info, response, got) => {
                const known = ids.includes(Buffer.from(got, 'binary').toString('hex'));
                answers.push(known ? response.toString('binary') : 'timeout');
                next();
            }, 3000);
        };
        next();
    }, 1500);
});

// send_async(slow), send_async(fast), both answered, then recv_async twice
// with no trans_id: the oldest request's answer first.
Task.prototype.oldest = handler(function (req) {
    const delay = this.api.prefix() + 'delay';
    this.api.send_async(delay, '400', () => {
        this.api.send_async(delay, '0', () => {
            setTimeout(() => {
                this.api.recv_async((i1, first) => {
                    this.api.recv_async((i2, second) => {
                        this.answer(req, first.toString('binary') + ',' + second.toString('binary'));
                    }, 1000);
                }, 1000);
            }, 1200);
        }, 5000);
    }, 5000);
});

const PATTERNS = ['member', 'whoami', 'delay', 'send_sync', 'send_async', 'forward', 'self_send', 'mcast_to',
    'oldest', 'triple', 'triple', 'triple', 'best/*'];

new CloudI.API(0, function (api) {
    const task = new Task(api);
    const patterns = api.process_index() == 0 ? PATTERNS.concat(['best/x']) : PATTERNS;
    const handler = { 'triple': task.whoami, 'best/*': task.star, 'best/x': task.whoami };
    const subscribe = (i) => {
        if (i == patterns.length) {
            api.poll(() => process.stdout.write('process ' + task.me + ': terminated\n'));
            return;
        }
        const p = patterns[i];
        api.subscribe(p, task, handler[p] || task[p], () => subscribe(i + 1));
    };
    subscribe(0);
});
