// Compiles each argument with java.util.regex.Pattern (as MM2 compiles topic and
// group regexes) and prints one line per argument: "ok" or "error".
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

public class RegexCompile {
    public static void main(String[] args) {
        for (String regex : args) {
            try {
                Pattern.compile(regex);
                System.out.println("ok");
            } catch (PatternSyntaxException e) {
                System.out.println("error");
            }
        }
    }
}
