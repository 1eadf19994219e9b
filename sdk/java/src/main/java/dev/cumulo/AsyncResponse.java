package dev.cumulo;

/** A successful RESPONSE collected by {@code recvAsync}, with the request it answers. */
public record AsyncResponse(TransId transId, Response response) {
}
