/* range_mean: the integer mean of the numbers that fall in a range.
 * First line: "RANGE <low> <high>"; then whitespace-separated integers (at most 1000).
 * Prints how many numbers are in [low, high] and their mean.
 */
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    int low, high;
    if (fscanf(f, " RANGE %d %d", &low, &high) != 2 || low > high) {
        printf("bad range\n");
        fclose(f);
        return 1;
    }
    int value, total = 0, count = 0, seen = 0;
    while (seen < 1000 && fscanf(f, "%d", &value) == 1) {
        seen++;
        if (value >= low && value <= high && value > -100000 && value < 100000) {
            total += value;
            count++;
        }
    }
    fclose(f);
    if (seen == 0) {
        printf("no numbers\n");
        return 1;
    }
    printf("%d of %d numbers in range, mean %d\n", count, seen, total / count);
    return 0;
}
