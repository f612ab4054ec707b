package ai.eliza;

/**
 * A libeliza failure: {@code status} is the C status code (a negative
 * ELIZA_E_* value, pinned by the ABI), the message says why. Thrown by the
 * JNI bridge; constructor signature (ILjava/lang/String;)V is part of its
 * contract.
 */
public class ElizaException extends RuntimeException {
    public static final int E_INVALID_ARG = -1;
    public static final int E_IO = -2;
    public static final int E_FORMAT = -3;
    public static final int E_UNSUPPORTED = -4;
    public static final int E_NOMEM = -5;
    public static final int E_CANCELLED = -6;
    public static final int E_ABI = -7;
    public static final int E_NOT_FOUND = -8;
    public static final int E_CONTEXT_FULL = -9;
    public static final int E_STATE = -10;
    public static final int E_INTERNAL = -11;

    private final int status;

    public ElizaException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** The C status code (ELIZA_E_*). */
    public int getStatus() {
        return status;
    }
}
