package rmqstore.peer;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** "--name value", "--name=value" and "--switch" flags, checked against what a command accepts. */
final class Args {
    private final Map<String, List<String>> values = new HashMap<>();
    private final Set<String> switches = new HashSet<>();

    /**
     * @param valued flags that take a value
     * @param bools flags without a value
     */
    static Args parse(String[] argv, int from, String[] valued, String[] bools) throws UsageException {
        Set<String> v = new HashSet<>(Arrays.asList(valued));
        Set<String> b = new HashSet<>(Arrays.asList(bools));
        Args a = new Args();
        for (int i = from; i < argv.length; i++) {
            String arg = argv[i];
            if (!arg.startsWith("--") || arg.length() == 2) {
                throw new UsageException("unexpected argument '" + arg + "'");
            }
            String name = arg.substring(2);
            String value = null;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            }
            if (b.contains(name)) {
                if (value != null) {
                    throw new UsageException("--" + name + " takes no value");
                }
                a.switches.add(name);
            } else if (v.contains(name)) {
                if (value == null) {
                    if (i + 1 >= argv.length) {
                        throw new UsageException("--" + name + " needs a value");
                    }
                    value = argv[++i];
                }
                a.values.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
            } else {
                throw new UsageException("unknown flag --" + name);
            }
        }
        return a;
    }

    boolean has(String name) {
        return switches.contains(name) || values.containsKey(name);
    }

    String str(String name, String dflt) {
        List<String> l = values.get(name);
        return l == null ? dflt : l.get(l.size() - 1);
    }

    String need(String name) throws UsageException {
        String s = str(name, null);
        if (s == null || s.isEmpty()) {
            throw new UsageException("--" + name + " is required");
        }
        return s;
    }

    List<String> all(String name) {
        List<String> l = values.get(name);
        return l == null ? new ArrayList<>() : l;
    }

    long num(String name, long dflt) throws UsageException {
        String s = str(name, null);
        if (s == null) {
            return dflt;
        }
        try {
            return Long.parseLong(s.trim());
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " must be a number, not '" + s + "'");
        }
    }

    int integer(String name, int dflt) throws UsageException {
        long n = num(name, dflt);
        if (n < Integer.MIN_VALUE || n > Integer.MAX_VALUE) {
            throw new UsageException("--" + name + " is out of range");
        }
        return (int) n;
    }

    /** "k=v" pairs of a repeatable flag. */
    List<String[]> pairs(String name) throws UsageException {
        List<String[]> out = new ArrayList<>();
        for (String s : all(name)) {
            int eq = s.indexOf('=');
            if (eq <= 0) {
                throw new UsageException("--" + name + " wants NAME=VALUE, not '" + s + "'");
            }
            out.add(new String[] {s.substring(0, eq), s.substring(eq + 1)});
        }
        return out;
    }
}
