package rmqstore.peer;

/** Bad command line: reported as an error line and exit code 2. */
final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
        super(message);
    }
}
