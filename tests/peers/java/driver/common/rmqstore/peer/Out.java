package rmqstore.peer;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The JSON Lines channel. It owns the process's real stdout; System.out is pointed at
 * stderr so that nothing else (a library's print) can reach stdout.
 */
final class Out {
    private static PrintStream out;
    private static final AtomicInteger ERRORS = new AtomicInteger();

    private Out() {
    }

    static void init() {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
    }

    static void emit(Json.Obj o) {
        String line = o.toString();
        synchronized (Out.class) {
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    /** Several lines written together (the messages of one batch). */
    static void emitAll(java.util.List<Json.Obj> objs) {
        StringBuilder sb = new StringBuilder();
        for (Json.Obj o : objs) {
            sb.append(o.toString()).append('\n');
        }
        synchronized (Out.class) {
            out.print(sb);
            out.flush();
        }
    }

    static int errors() {
        return ERRORS.get();
    }

    /** Prints an error line and counts it. */
    static void error(String step, Throwable t) {
        error(step, describe(t), null);
    }

    static void error(String step, String message, Json.Obj extra) {
        ERRORS.incrementAndGet();
        Json.Obj o = Json.obj("error").put("step", step).put("exception", message);
        if (extra != null) {
            o.fields.putAll(extra.fields);
        }
        emit(o);
    }

    static String describe(Throwable t) {
        String msg = t.getMessage();
        String s = t.getClass().getName() + ": " + (msg == null ? "" : msg);
        Throwable c = t.getCause();
        if (c != null && c != t) {
            String cm = c.getMessage();
            s += " (caused by " + c.getClass().getName() + ": " + (cm == null ? "" : cm) + ")";
        }
        // one line: keep the JSON line short and readable
        s = s.replace('\n', ' ').replace('\r', ' ');
        return s.length() > 2000 ? s.substring(0, 2000) : s;
    }

    static void flush() {
        synchronized (Out.class) {
            out.flush();
        }
    }
}
