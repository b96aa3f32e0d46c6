CREATE PROCEDURE refreshSemaphoreLock(IN tokenIn VARCHAR(64), IN timeoutSec INT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    /* only a live lease: one whose deadline is still ahead */
    UPDATE SEMAPHORE_LOCK SET EXPIRES_ON = UTC_TIMESTAMP(6) + INTERVAL timeoutSec SECOND
        WHERE TOKEN = tokenIn AND EXPIRES_ON > UTC_TIMESTAMP(6);
    SELECT ROW_COUNT() AS RESULT;
END
