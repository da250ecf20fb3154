package rmqstore.peer;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;

/** A small JSON writer: objects keep insertion order, strings are escaped per RFC 8259. */
final class Json {
    private Json() {
    }

    /** An ordered JSON object under construction. */
    static final class Obj {
        final LinkedHashMap<String, Object> fields = new LinkedHashMap<>();

        Obj put(String key, Object value) {
            fields.put(key, value);
            return this;
        }

        /** Puts the value only when it is not null. */
        Obj opt(String key, Object value) {
            if (value != null) {
                fields.put(key, value);
            }
            return this;
        }

        @Override
        public String toString() {
            StringBuilder sb = new StringBuilder(256);
            write(sb, this);
            return sb.toString();
        }
    }

    static Obj obj(String type) {
        return new Obj().put("type", type);
    }

    static Obj obj() {
        return new Obj();
    }

    static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Obj) {
            writeMap(sb, ((Obj) v).fields);
        } else if (v instanceof Map) {
            writeMap(sb, (Map<?, ?>) v);
        } else if (v instanceof CharSequence || v instanceof Character || v instanceof Enum) {
            writeString(sb, v.toString());
        } else if (v instanceof Boolean) {
            sb.append(((Boolean) v) ? "true" : "false");
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                sb.append("null");
            } else if (d == Math.rint(d) && Math.abs(d) < 1e15) {
                sb.append((long) d);
            } else {
                sb.append(d);
            }
        } else if (v instanceof Number) {
            sb.append(v.toString());
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object e : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, e);
            }
            sb.append(']');
        } else if (v instanceof long[]) {
            long[] a = (long[]) v;
            sb.append('[');
            for (int i = 0; i < a.length; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append(a[i]);
            }
            sb.append(']');
        } else if (v instanceof int[]) {
            int[] a = (int[]) v;
            sb.append('[');
            for (int i = 0; i < a.length; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append(a[i]);
            }
            sb.append(']');
        } else if (v instanceof Object[]) {
            Object[] a = (Object[]) v;
            sb.append('[');
            for (int i = 0; i < a.length; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                write(sb, a[i]);
            }
            sb.append(']');
        } else {
            writeString(sb, v.toString());
        }
    }

    private static void writeMap(StringBuilder sb, Map<?, ?> m) {
        sb.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            writeString(sb, String.valueOf(e.getKey()));
            sb.append(':');
            write(sb, e.getValue());
        }
        sb.append('}');
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /** Quotes a string; non-ASCII text stays as is (the stream encodes it as UTF-8). */
    static void writeString(StringBuilder sb, String s) {
        sb.append('"');
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                case '\b':
                    sb.append("\\b");
                    break;
                case '\f':
                    sb.append("\\f");
                    break;
                default:
                    if (c < 0x20 || c == 0x7f || c == '\u2028' || c == '\u2029') {
                        sb.append("\\u").append(HEX[(c >> 12) & 0xf]).append(HEX[(c >> 8) & 0xf])
                            .append(HEX[(c >> 4) & 0xf]).append(HEX[c & 0xf]);
                    } else if (Character.isHighSurrogate(c)) {
                        if (i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                            sb.append(c).append(s.charAt(i + 1));
                            i++;
                        } else {
                            sb.append('\uFFFD'); // lone surrogate: not encodable in UTF-8
                        }
                    } else if (Character.isLowSurrogate(c)) {
                        sb.append('\uFFFD');
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
