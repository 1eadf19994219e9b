<?php

declare(strict_types=1);

namespace Cumulo;

/**
 * One instance: one connection to the core. Timeouts are in milliseconds,
 * as on the wire; null means the core's default.
 */
final class Api
{
    public const WAIT_FOR_SERVICE = 0x01;
    /** A REQUEST carries more than the SEND it came from (source, pattern). */
    private const REQUEST_OVERHEAD = 8 + 2 + 0xffff;
    /** How long past a request's timeout to wait for the core's own TIMEOUT. */
    private const GRACE_MS = 1000;
    private const HANDSHAKE_TIMEOUT_MS = 30000;

    private Connection $connection;
    private array $welcome;
    private int $maxFrame;
    /** @var array<string, callable> full pattern => handler */
    private array $handlers = [];
    /** @var list<Request> requests that arrived while waiting for something else */
    private array $queue = [];
    /** @var array<string, array> RESPONSE fields by trans_id, oldest first */
    private array $responses = [];
    /** @var array<string, true> send_sync trans_ids given up on */
    private array $abandoned = [];
    private int $nextReqId = 0;
    private int $lastTimeNs = 0;
    private bool $terminated = false;
    /**
     * The trace context of the request whose handler runs (PROTOCOL.md 5.1):
     * its encoded traceparent/tracestate pairs, else null. Kept on the
     * instance: PHP has no threads and an instance runs one handler at a time.
     */
    private ?string $trace = null;

    /**
     * Managed (started by the core): everything comes from the environment.
     * Unmanaged (tests, tools): pass $socket and $prefix, no token.
     * $maxFrame caps frames read from the core (default: the core's
     * max_frame plus what a REQUEST adds).
     */
    public function __construct(
        private readonly int $threadIndex = 0,
        ?string $socket = null,
        ?string $token = null,
        ?string $prefix = null,
        int $window = 1,
        private readonly ?int $readLimit = null,
    ) {
        $socket ??= (string) getenv('CUMULO_SOCKET');
        $token ??= (string) getenv('CUMULO_TOKEN');
        $helloPrefix = $token === '' ? (string) $prefix : '';
        if ($token === '' && !str_starts_with($helloPrefix, '/')) {
            throw CumuloException::invalidArgument("an unmanaged instance needs a prefix starting with '/'");
        }
        $this->maxFrame = $readLimit ?? Codec::DEFAULT_MAX_FRAME;
        $this->connection = new Connection($socket);
        try {
            $this->handshake($token, $helloPrefix, $window);
        } catch (\Throwable $e) {
            $this->connection->close();
            throw $e;
        }
    }

    /**
     * Subscribes $pattern (relative to the prefix). $handler(Request, Api)
     * returns the response: a string, or [response_info, response] where
     * response_info is a string or an array for Info::encode.
     */
    public function subscribe(string $pattern, callable $handler): void
    {
        $this->control('SUBSCRIBE', $pattern);
        $this->handlers[$this->prefix() . $pattern] = $handler;
    }

    public function unsubscribe(string $pattern): void
    {
        $this->control('UNSUBSCRIBE', $pattern);
        if ($this->subscribeCount($pattern) === 0) {
            unset($this->handlers[$this->prefix() . $pattern]);
        }
    }

    public function subscribeCount(string $pattern): int
    {
        return $this->control('SUBSCRIBE_COUNT', $pattern);
    }

    /** Returns the new request's trans_id; collect the answer with recvAsync. */
    public function sendAsync(
        string $name,
        string $request,
        string|array $requestInfo = '',
        ?int $timeout = null,
        ?int $priority = null,
        bool $waitForService = false,
    ): string {
        return $this->sendRequest('SEND_ASYNC', $name, $request, $requestInfo, $timeout, $priority, $waitForService);
    }

    /**
     * @return array{0: string, 1: string} [response_info, response]
     * @throws CumuloException with the response's status for an error status
     */
    public function sendSync(
        string $name,
        string $request,
        string|array $requestInfo = '',
        ?int $timeout = null,
        ?int $priority = null,
        bool $waitForService = false,
    ): array {
        $transId = $this->sendRequest('SEND_SYNC', $name, $request, $requestInfo, $timeout, $priority, $waitForService);
        $fields = $this->await(
            $this->deadlineAfter($timeout ?? $this->timeoutSync()),
            fn (Frame $f) => $f->type === 'RESPONSE' && $f->fields['trans_id'] === $transId ? $f->fields : null,
        );
        if ($fields === null) {
            $this->abandoned[$transId] = true;
            throw new CumuloException("no response to $name in time", Status::TIMEOUT, $transId);
        }
        return $this->answer($fields);
    }

    /** Sends a copy to every matching subscriber; returns their trans_ids. */
    public function mcastAsync(
        string $name,
        string $request,
        string|array $requestInfo = '',
        ?int $timeout = null,
        ?int $priority = null,
        bool $waitForService = false,
    ): array {
        $transId = $this->sendRequest('MCAST_ASYNC', $name, $request, $requestInfo, $timeout, $priority, $waitForService);
        $fields = $this->await(
            $this->deadlineAfter($timeout ?? $this->timeoutAsync()),
            fn (Frame $f) => $f->type === 'MCAST_SENT' && $f->fields['trans_id'] === $transId ? $f->fields : null,
        );
        if ($fields === null) {
            throw new CumuloException("no MCAST_SENT for $name in time", Status::TIMEOUT, $transId);
        }
        return $fields['trans_ids'];
    }

    /**
     * The Response of $transId, or of any async send when null.
     * @throws CumuloException the response's error status, or TIMEOUT if nothing came
     */
    public function recvAsync(?string $transId = null, ?int $timeout = null): Response
    {
        $fields = $this->takeResponse($transId) ?? $this->await(
            $this->deadlineAfter($timeout ?? $this->timeoutAsync()),
            fn (Frame $f) => $f->type === 'RESPONSE' && ($transId === null || $f->fields['trans_id'] === $transId)
                ? $f->fields : null,
        );
        if ($fields === null) {
            throw new CumuloException('no response received in time', Status::TIMEOUT, $transId);
        }
        [$info, $response] = $this->answer($fields);
        return new Response($fields['trans_id'], $info, $response);
    }

    /** Passes $req (being handled) on to $name; the handler's return value is then ignored. */
    public function forward(
        Request $req,
        string $name,
        string|array|null $requestInfo = null,
        ?string $request = null,
        ?int $timeout = null,
        ?int $priority = null,
    ): void {
        $this->connection->writeFrame('FORWARD', [
            'trans_id' => $req->transId, 'timeout' => $timeout ?? $req->timeout,
            'priority' => $priority ?? $req->priority, 'flags' => 0, 'name' => $name,
            'request_info' => $this->traced(self::infoBytes($requestInfo ?? $req->requestInfo)),
            'request' => $request ?? $req->request,
        ], $this->maxFrame);
        $req->markForwarded();
    }

    /**
     * The event loop. Returns false once TERMINATE arrived (after finishing
     * the requests already delivered), true when $timeout ms passed first.
     */
    public function poll(?int $timeout = null): bool
    {
        $deadline = $timeout === null ? null : $this->deadlineAfter($timeout, 0);
        while (true) {
            $request = array_shift($this->queue);
            if ($request !== null) {
                $this->handle($request);
                continue;
            }
            if ($this->terminated) {
                return false;
            }
            $frame = $this->nextFrame($deadline);
            if ($frame === null) {
                return true;
            }
            $this->background($frame);
        }
    }

    public function isTerminated(): bool
    {
        return $this->terminated;
    }

    /** Says GOODBYE and closes the connection. */
    public function close(): void
    {
        if ($this->connection->isClosed()) {
            return;
        }
        try {
            $this->connection->writeFrame('GOODBYE', [], $this->maxFrame);
        } catch (CumuloException) {
            // already gone
        }
        $this->connection->close();
    }

    /** @return resource the socket, for multiplexing several instances */
    public function stream()
    {
        return $this->connection->stream();
    }

    public function threadIndex(): int { return $this->threadIndex; }
    public function nodeId(): int { return $this->welcome['node_id']; }
    public function instanceId(): int { return $this->welcome['instance_id']; }
    public function processIndex(): int { return $this->welcome['process_index']; }
    public function processCount(): int { return $this->welcome['process_count']; }
    public function threadCount(): int { return $this->welcome['thread_count']; }
    public function window(): int { return $this->welcome['window']; }
    public function maxFrame(): int { return $this->maxFrame; }
    public function keepalive(): int { return $this->welcome['keepalive']; }
    public function timeoutAsync(): int { return $this->welcome['timeout_async']; }
    public function timeoutSync(): int { return $this->welcome['timeout_sync']; }
    public function timeoutTerminate(): int { return $this->welcome['timeout_terminate']; }
    public function priorityDefault(): int { return $this->welcome['priority_default']; }
    public function prefix(): string { return $this->welcome['prefix']; }

    public static function infoEncode(array $pairs): string
    {
        return Info::encode($pairs);
    }

    public static function infoParse(string $data): array
    {
        return Info::parse($data);
    }

    private function handshake(string $token, string $helloPrefix, int $window): void
    {
        $this->connection->writeFrame('HELLO', [
            'version' => Codec::VERSION, 'window' => $window, 'thread_index' => $this->threadIndex,
            'token' => $token, 'prefix' => $helloPrefix,
        ], $this->maxFrame);
        $frame = $this->nextFrame($this->deadlineAfter(self::HANDSHAKE_TIMEOUT_MS, 0));
        if ($frame === null) {
            throw new CumuloException('no WELCOME from the core', Status::TIMEOUT);
        }
        if ($frame->type === 'ERROR') {
            throw new CumuloException($frame->fields['message'], $frame->fields['status']);
        }
        if ($frame->type !== 'WELCOME') {
            throw new CumuloException("expected WELCOME, got {$frame->type}", Status::PROTOCOL);
        }
        $this->welcome = $frame->fields;
        $this->maxFrame = $frame->fields['max_frame'];
    }

    private function control(string $type, string $pattern): int
    {
        $reqId = $this->nextReqId = ($this->nextReqId + 1) & 0xffffffff;
        $this->connection->writeFrame($type, ['req_id' => $reqId, 'pattern' => $pattern], $this->maxFrame);
        $fields = $this->await(
            null,
            fn (Frame $f) => $f->type === 'REPLY' && $f->fields['req_id'] === $reqId ? $f->fields : null,
        );
        if ($fields['status'] !== Status::OK) {
            throw new CumuloException($fields['message'], $fields['status']);
        }
        return $fields['value'];
    }

    private function sendRequest(
        string $type,
        string $name,
        string $request,
        string|array $requestInfo,
        ?int $timeout,
        ?int $priority,
        bool $waitForService,
    ): string {
        $transId = $this->newTransId();
        $this->connection->writeFrame($type, [
            'trans_id' => $transId, 'timeout' => $timeout ?? 0, 'priority' => $priority ?? $this->priorityDefault(),
            'flags' => $waitForService ? self::WAIT_FOR_SERVICE : 0, 'name' => $name,
            'request_info' => $this->traced(self::infoBytes($requestInfo)), 'request' => $request,
        ], $this->maxFrame);
        return $transId;
    }

    /** PROTOCOL 2.2: time (ns, strictly increasing), node_id, instance_id. */
    private function newTransId(): string
    {
        static $offsetNs = null; // wall clock minus monotonic clock, read once for ns resolution
        $offsetNs ??= (int) (microtime(true) * 1e6) * 1000 - hrtime(true);
        $timeNs = max(hrtime(true) + $offsetNs, $this->lastTimeNs + 1);
        $this->lastTimeNs = $timeNs;
        return pack('JNN', $timeNs, $this->nodeId(), $this->instanceId());
    }

    /**
     * Reads frames until $wanted returns non-null for one (returned) or the
     * deadline passes (null); every other frame is handled in the background.
     */
    private function await(?float $deadline, callable $wanted): ?array
    {
        while (true) {
            $frame = $this->nextFrame($deadline);
            if ($frame === null) {
                return null;
            }
            $result = $wanted($frame);
            if ($result !== null) {
                return $result;
            }
            $this->background($frame);
        }
    }

    private function nextFrame(?float $deadline): ?Frame
    {
        $limit = $this->readLimit ?? $this->maxFrame + self::REQUEST_OVERHEAD;
        try {
            return $this->connection->readFrame($deadline, $limit);
        } catch (CumuloException $e) {
            $this->connection->close(); // after a bad frame the stream cannot be resynchronised
            throw $e;
        }
    }

    private function background(Frame $frame): void
    {
        $fields = $frame->fields;
        switch ($frame->type) {
            case 'PING':
                $this->connection->writeFrame('PONG', ['nonce' => $fields['nonce']], $this->maxFrame);
                break;
            case 'REQUEST':
                $this->queue[] = Request::fromFields($fields);
                break;
            case 'RESPONSE':
                if (isset($this->abandoned[$fields['trans_id']])) {
                    unset($this->abandoned[$fields['trans_id']]);
                } else {
                    $this->responses[$fields['trans_id']] = $fields;
                }
                break;
            case 'TERMINATE':
                $this->terminated = true;
                break;
            case 'ERROR':
                $this->connection->close();
                throw new CumuloException($fields['message'], $fields['status']);
            case 'REPLY':
            case 'MCAST_SENT':
            case 'PONG':
                break; // answers nobody waits for any more
            default:
                throw new CumuloException("unexpected {$frame->type} from the core", Status::PROTOCOL);
        }
    }

    private function takeResponse(?string $transId): ?array
    {
        $transId ??= array_key_first($this->responses);
        if ($transId === null || !isset($this->responses[$transId])) {
            return null;
        }
        $fields = $this->responses[$transId];
        unset($this->responses[$transId]);
        return $fields;
    }

    /** @return array{0: string, 1: string} */
    private function answer(array $fields): array
    {
        if ($fields['status'] !== Status::OK) {
            throw new CumuloException($fields['response'], $fields['status'], $fields['trans_id']);
        }
        return [$fields['response_info'], $fields['response']];
    }

    private function handle(Request $req): void
    {
        $handler = $this->handlers[$req->pattern] ?? null;
        [$status, $info, $response] = $handler === null
            ? [Status::NO_SERVICE, '', "no handler for {$req->pattern}"]
            : $this->runHandler($handler, $req);
        if ($req->isForwarded()) {
            return;
        }
        $fields = ['trans_id' => $req->transId, 'status' => $status, 'response_info' => $info, 'response' => $response];
        try {
            $this->connection->writeFrame('RETURN', $fields, $this->maxFrame);
        } catch (CumuloException $e) {
            if ($e->status() !== Status::TOO_LARGE) {
                throw $e;
            }
            $error = ['status' => Status::TOO_LARGE, 'response_info' => '', 'response' => $e->getMessage()];
            $this->connection->writeFrame('RETURN', $error + $fields, $this->maxFrame);
        }
    }

    private function runHandler(callable $handler, Request $req): array
    {
        // PROTOCOL.md 5.1: the handler's calls inherit the request's trace context.
        $previous = $this->trace;
        $this->trace = self::traceContext($req->requestInfo);
        try {
            $result = $handler($req, $this);
            [$info, $response] = is_array($result) ? $result : ['', $result];
            if ($response !== null && !is_string($response)) {
                throw new \TypeError('handler returned ' . get_debug_type($response) . ', not a string');
            }
            return [Status::OK, self::infoBytes($info), (string) $response];
        } catch (\Throwable $e) {
            // The sender gets the message; the stack trace goes to stderr, in
            // one write so that the core logs it as one record.
            fwrite(STDERR, "cumulo: handler for {$req->name} threw {$e}\n");
            return [Status::SERVICE_ERROR, '', get_class($e) . ': ' . $e->getMessage()];
        } finally {
            $this->trace = $previous;
        }
    }

    /**
     * The encoded traceparent and tracestate pairs of $info, or null without
     * a traceparent (a request without one is not parsed).
     */
    private static function traceContext(string $info): ?string
    {
        if (!str_contains($info, "traceparent\0")) {
            return null;
        }
        try {
            $pairs = Info::parse($info);
        } catch (CumuloException) {
            return null;
        }
        $parent = $state = null;
        foreach ($pairs as $pair) {
            if ($pair[0] === 'traceparent') {
                $parent ??= $pair;
            } elseif ($pair[0] === 'tracestate') {
                $state ??= $pair;
            }
        }
        return $parent === null ? null : Info::encode($state === null ? [$parent] : [$parent, $state]);
    }

    /**
     * $info (encoded) with the current trace context appended, unless it has
     * a traceparent of its own or no handler with a context is running.
     */
    private function traced(string $info): string
    {
        if ($this->trace === null) {
            return $info;
        }
        try {
            foreach (Info::parse($info) as [$key]) {
                if ($key === 'traceparent') {
                    return $info;
                }
            }
        } catch (CumuloException) {
            return $info; // malformed: sent as given, for the core to refuse
        }
        return $info . $this->trace;
    }

    private static function infoBytes(string|array|null $info): string
    {
        return is_array($info) ? Info::encode($info) : (string) $info;
    }

    private function deadlineAfter(int $milliseconds, int $grace = self::GRACE_MS): float
    {
        return Connection::now() + ($milliseconds + $grace) / 1000;
    }
}
