package rmqstore.peer;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The peer driver: runs the real RocketMQ Java store and clients for the project's tests.
 *
 * <pre>
 * java @KIT/driver/jvm.args -Drocketmq.client.logRoot=DIR -Duser.home=DIR rmqstore.peer.Driver CMD [--flags]
 *
 *   KIT = $RMQSTORE_PEERS/java/client-4.9 (4.9.8 jars) or $RMQSTORE_PEERS/java/5.x (5.5.0 jars)
 *
 * jvm.args (written by the install script) holds:
 *   --add-opens java.base/java.nio=ALL-UNNAMED        the store maps and unmaps files
 *   --add-opens java.base/sun.nio.ch=ALL-UNNAMED      through DirectByteBuffer internals
 *   --add-exports java.base/sun.nio.ch=ALL-UNNAMED
 *   --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
 *   --add-opens java.base/java.lang=ALL-UNNAMED       fastjson / netty reflection
 *   -XX:+UseSerialGC -XX:TieredStopAtLevel=1          quicker start of a short run
 *   -Xlog:disable -Xlog:all=warning:stderr            JVM warnings to stderr, never stdout
 *   -XX:SharedArchiveFile=KIT/driver/app.jsa          class data archive made by install
 *   -cp "KIT/driver/rmqstore-peer.jar:KIT/lib/*"      the class path the archive is for
 * The plain form -cp "KIT/driver:KIT/lib/*" with the same flags (no archive) works too.
 *
 * Caller properties:
 *   -Drocketmq.client.logRoot=DIR   where all logs go (default ~/logs/rocketmqlogs)
 *   -Duser.home=DIR                 RocketMQ also writes under the home directory
 *                                   (broadcast offsets, the 5.x store's RocksDB log)
 *
 * The driver sets these itself unless given:
 *   rocketmq.client.logUseSlf4j=false   4.9 client logs with its own file logger
 *                                       (rocketmq_client.log in the log root)
 *   logback.configurationFile, rmq.logback.configurationFile = rmqstore-peer-logback.xml
 *                                       4.9 store (plain logback) and everything on 5.x
 *                                       (relocated logback) log to rmqstore-peer.log
 *   rocketmq.log.root = the log root    gRPC client (rocketmq-client.log)
 *   mq.consoleAppender.enabled=false    5.x console appenders stay silent
 *   tls.server.mode=disabled            no self-signed certificate for the 5.x store's HA server
 *   rocketmq.client.rebalance.waitInterval=1000   consumers rebalance every second
 *                                       (RocketMQ: 20 s), so retry topics are picked up soon
 * </pre>
 *
 * stdout carries only JSON Lines, one object per line, "type" first. Errors are
 * {"type":"error",...} lines; the exit code is 2 for bad usage and 1 for failure. A run that
 * gets to its end prints one {"type":"summary",...} line (exit 1 if it counted errors).
 */
public final class Driver {
    static final String LOG_CONFIG = "rmqstore-peer-logback.xml";

    private Driver() {
    }

    public static void main(String[] argv) {
        Out.init();
        setupLogging();
        int code;
        try {
            code = run(argv);
        } catch (UsageException e) {
            Out.error("usage", e.getMessage(), null);
            code = 2;
        } catch (Throwable t) {
            Out.error("run", t);
            code = 1;
        }
        Out.flush();
        // halt: no shutdown hooks, nothing of RocketMQ runs after the answer
        Runtime.getRuntime().halt(code);
    }

    private static void setIfAbsent(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    /** Logging and client settings, set before any RocketMQ class is loaded. */
    static void setupLogging() {
        setIfAbsent("rocketmq.client.logRoot", System.getProperty("user.home") + "/logs/rocketmqlogs");
        String root = System.getProperty("rocketmq.client.logRoot");
        setIfAbsent("rocketmq.log.root", root);
        setIfAbsent("rocketmq.client.logUseSlf4j", "false");
        setIfAbsent("logback.configurationFile", LOG_CONFIG);
        setIfAbsent("rmq.logback.configurationFile", LOG_CONFIG);
        setIfAbsent("mq.consoleAppender.enabled", "false");
        setIfAbsent("rmqstore.peer.pid", Long.toString(ProcessHandle.current().pid()));
        // the 5.x store starts a remoting server for HA; in TLS "permissive" mode (the default)
        // it first makes a self-signed certificate, which costs a second or more
        setIfAbsent("tls.server.mode", "disabled");
        // consumers rebalance every 20 s by default: a new retry topic would wait that long
        setIfAbsent("rocketmq.client.rebalance.waitInterval", "1000");
    }

    static final Compat COMPAT = new CompatImpl();

    private static List<String> commands() {
        List<String> l = new ArrayList<>(Arrays.asList("store", "produce", "consume", "version"));
        l.addAll(COMPAT.extraCommands());
        return l;
    }

    static int run(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw new UsageException("usage: Driver COMMAND [--flags]; commands: " + String.join(", ", commands()));
        }
        String cmd = argv[0];
        switch (cmd) {
            case "store":
                return StoreCommand.run(argv);
            case "produce":
                return ProduceCommand.run(argv);
            case "consume":
                return ConsumeCommand.run(argv);
            case "version":
                return version(argv);
            default:
                if (COMPAT.extraCommands().contains(cmd)) {
                    return COMPAT.runExtra(cmd, argv);
                }
                throw new UsageException("unknown command '" + cmd + "' for the " + COMPAT.line()
                    + " kit; commands: " + String.join(", ", commands()));
        }
    }

    /** Prints what this kit is; also a cheap run for measuring JVM start. */
    private static int version(String[] argv) throws UsageException {
        Args.parse(argv, 1, new String[0], new String[0]);
        Out.emit(Json.obj("version")
            .put("line", COMPAT.line())
            .put("rocketmq", COMPAT.rocketmqVersion())
            .put("java", System.getProperty("java.version"))
            .put("commands", commands()));
        Out.emit(Json.obj("summary").put("errors", Out.errors()));
        return 0;
    }
}
