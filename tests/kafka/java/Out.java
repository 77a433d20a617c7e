import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collection;
import java.util.Map;

/**
 * One JSON object per line on stdout, for the Python side of the tests to read: {@code
 * Out.line("partition", 0, "offset", 5L)} prints {@code {"partition":0,"offset":5}}. Values may
 * be strings, numbers, booleans, null, byte arrays (base64 strings), collections (arrays) and
 * maps (objects).
 */
final class Out {
    private Out() {}

    static synchronized void line(Object... keysAndValues) {
        StringBuilder out = new StringBuilder("{");
        for (int i = 0; i < keysAndValues.length; i += 2) {
            if (i > 0) {
                out.append(',');
            }
            out.append(quote(String.valueOf(keysAndValues[i]))).append(':');
            value(out, keysAndValues[i + 1]);
        }
        System.out.println(out.append('}'));
        System.out.flush();
    }

    static String b64(byte[] bytes) {
        return bytes == null ? null : Base64.getEncoder().encodeToString(bytes);
    }

    static byte[] utf8(String text) {
        return text == null ? null : text.getBytes(StandardCharsets.UTF_8);
    }

    private static void value(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof byte[] bytes) {
            out.append(quote(b64(bytes)));
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                out.append(quote(String.valueOf(e.getKey()))).append(':');
                value(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            boolean first = true;
            for (Object item : items) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                value(out, item);
            }
            out.append(']');
        } else {
            out.append(quote(value.toString()));
        }
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }

    /** An exception as the tests compare it: its class's simple name and its message, with the
     * cause that the Java clients wrap in ExecutionException or KafkaException unwrapped. */
    static Map<String, Object> error(Throwable e) {
        Throwable t = e;
        while ((t instanceof java.util.concurrent.ExecutionException
                        || t instanceof java.util.concurrent.CompletionException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("error", t.getClass().getSimpleName());
        out.put("message", t.getMessage());
        return out;
    }
}
