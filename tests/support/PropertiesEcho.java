// Loads a .properties file with java.util.Properties and prints each entry as
// JSON-escaped "key" "value" lines, so tests can check our escaping against Java.
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeSet;

public class PropertiesEcho {
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        // An InputStream, read as ISO-8859-1: how Kafka loads its config files.
        try (FileInputStream in = new FileInputStream(args[0])) { p.load(in); }
        for (String k : new TreeSet<>(p.stringPropertyNames())) System.out.println("[" + q(k) + "," + q(p.getProperty(k)) + "]");
    }
}
