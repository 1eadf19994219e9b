package dev.cumulo;

/** Prepares one instance (usually its subscriptions) before {@link Api#run} polls it. */
@FunctionalInterface
public interface Setup {
    void setup(Api api) throws Exception;
}
