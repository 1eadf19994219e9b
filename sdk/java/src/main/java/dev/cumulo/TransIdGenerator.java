package dev.cumulo;

import java.time.Instant;

/** Makes the trans_ids of one instance: strictly increasing even when the clock stands still. */
final class TransIdGenerator {
    private final long nodeId;
    private final long instanceId;
    private long lastNanos;

    TransIdGenerator(long nodeId, long instanceId) {
        this.nodeId = nodeId;
        this.instanceId = instanceId;
    }

    TransId next() {
        Instant now = Instant.now();
        long nanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
        lastNanos = Math.max(nanos, lastNanos + 1);
        return TransId.of(lastNanos, nodeId, instanceId);
    }
}
