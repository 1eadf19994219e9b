package dev.cumulo;

/**
 * Answers the requests of one subscribed pattern. What it returns becomes the RETURN (null is an
 * empty answer); an exception becomes a RETURN with status SERVICE_ERROR. A handler that calls
 * {@link Api#forward} sends no RETURN, whatever it returns.
 */
@FunctionalInterface
public interface Handler {
    Response handle(Api api, Request request) throws Exception;
}
