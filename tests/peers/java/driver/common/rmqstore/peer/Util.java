package rmqstore.peer;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;

/** Helpers that use the JDK only (the gRPC commands run without the RocketMQ jars). */
final class Util {
    private Util() {
    }

    static String sha256(byte[] b) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(b == null ? new byte[0] : b);
            StringBuilder sb = new StringBuilder(64);
            for (byte x : d) {
                sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static String base64(byte[] b) {
        return Base64.getEncoder().encodeToString(b == null ? new byte[0] : b);
    }

    static Map<String, String> sorted(Map<String, String> m) {
        return m == null ? new TreeMap<>() : new TreeMap<>(m);
    }

    /** The body our producers send: "rmqstore message <i>" padded with 'x' to size bytes. */
    static byte[] body(long i, int size) {
        StringBuilder sb = new StringBuilder("rmqstore message ").append(i);
        while (sb.length() < size) {
            sb.append('x');
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
